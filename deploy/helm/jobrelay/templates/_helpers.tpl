{{/* Names and labels shared by the manager's and the agent's objects. */}}

{{/* The chart name, or nameOverride. */}}
{{- define "jobrelay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The base name of every object: fullnameOverride, else the release name when it
already contains the chart name, else <release>-<chart>. Kept short enough for
the "-manager" and "-agent" suffixes.
*/}}
{{- define "jobrelay.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object; call with (dict "ctx" $ "component" "manager"). */}}
{{- define "jobrelay.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "jobrelay.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: jobrelay
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select one component's Pods; never change after install. */}}
{{- define "jobrelay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "jobrelay.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The ServiceAccount of a component; call like jobrelay.labels. */}}
{{- define "jobrelay.serviceAccountName" -}}
{{- $values := index .ctx.Values .component }}
{{- if $values.serviceAccount.create }}
{{- default (printf "%s-%s" (include "jobrelay.fullname" .ctx) .component) $values.serviceAccount.name }}
{{- else }}
{{- default "default" $values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference of a component; the tag defaults to appVersion;
with a digest, pinned by it (`repository:tag@sha256:…`). */}}
{{- define "jobrelay.image" -}}
{{- $image := (index .ctx.Values .component).image }}
{{- $reference := printf "%s:%s" $image.repository (default .ctx.Chart.AppVersion $image.tag) }}
{{- with $image.digest }}
{{- $reference = printf "%s@%s" $reference . }}
{{- end }}
{{- $reference }}
{{- end }}

{{/* The origin, which both components need. */}}
{{- define "jobrelay.origin" -}}
{{- required "origin is required: the manager's identity, the same in the manager's and every agent's release" .Values.origin }}
{{- end }}

{{/* Where the TLS Secret and the configuration file are mounted. */}}
{{- define "jobrelay.tlsDir" -}}/etc/jobrelay/tls{{- end }}
{{- define "jobrelay.configDir" -}}/etc/jobrelay/config{{- end }}
{{- define "jobrelay.clientCADir" -}}/etc/jobrelay/client-ca{{- end }}

{{/*
The manager's client CA bundle: manager.clientCA's Secret or ConfigMap (the
source, as a volume), or — said outright with fromTLSSecret — the serving
Secret's ca.crt. Naming none is refused: the CA that issues agent
certificates should vouch for nothing else.
*/}}
{{- define "jobrelay.clientCAVolume" -}}
{{- $ca := .Values.manager.clientCA -}}
{{- if and $ca.secretName $ca.configMapName -}}
{{- fail "manager.clientCA: name a secretName or a configMapName, not both" -}}
{{- else if and $ca.fromTLSSecret (or $ca.secretName $ca.configMapName) -}}
{{- fail "manager.clientCA: name a bundle of its own or set fromTLSSecret, not both" -}}
{{- else if not (or $ca.fromTLSSecret $ca.secretName $ca.configMapName) -}}
{{- fail "manager.clientCA is required: the CA bundle agent certificates must chain to, a CA of its own (secretName or configMapName, key ca.crt); or set manager.clientCA.fromTLSSecret=true to trust the ca.crt of manager.tls.secretName, the CA of the manager's own certificate (one CA for both sides: not for production; docs/security.md)" -}}
{{- else if $ca.secretName -}}
secret:
  secretName: {{ $ca.secretName }}
  defaultMode: 288
{{- else if $ca.configMapName -}}
configMap:
  name: {{ $ca.configMapName }}
{{- end -}}
{{- end }}
{{- define "jobrelay.clientCAFile" -}}
{{- if include "jobrelay.clientCAVolume" . -}}
{{ include "jobrelay.clientCADir" . }}/{{ required "manager.clientCA.key is required" .Values.manager.clientCA.key }}
{{- else -}}
{{ include "jobrelay.tlsDir" . }}/ca.crt
{{- end -}}
{{- end }}

{{- define "jobrelay.managerCADir" -}}/etc/jobrelay/manager-ca{{- end }}

{{/*
The agent's bundle of the manager's CA: agent.managerCA's Secret or
ConfigMap (the source, as a volume); none, the TLS Secret's ca.crt.
*/}}
{{- define "jobrelay.managerCAVolume" -}}
{{- $ca := .Values.agent.managerCA -}}
{{- if and $ca.secretName $ca.configMapName -}}
{{- fail "agent.managerCA: name a secretName or a configMapName, not both" -}}
{{- else if $ca.secretName -}}
secret:
  secretName: {{ $ca.secretName }}
  defaultMode: 288
{{- else if $ca.configMapName -}}
configMap:
  name: {{ $ca.configMapName }}
{{- end -}}
{{- end }}
{{- define "jobrelay.managerCAFile" -}}
{{- if include "jobrelay.managerCAVolume" . -}}
{{ include "jobrelay.managerCADir" . }}/{{ required "agent.managerCA.key is required" .Values.agent.managerCA.key }}
{{- else -}}
{{ include "jobrelay.tlsDir" . }}/ca.crt
{{- end -}}
{{- end }}

{{/*
The API server address for clients in the Pod, when set: it wins over the
`kubernetes` Service's ClusterIP that Kubernetes injects (for clusters where
nothing routes that address, e.g. without kube-proxy, or with hostNetwork).
*/}}
{{- define "jobrelay.apiServerEnv" -}}
{{- with .Values.k8sServiceHost }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ . | quote }}
{{- end }}
{{- with .Values.k8sServicePort }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{/*
The Pod's network: its own, or the node's when `hostNetwork` is set (then
its ports must be free on the node, and DNS still resolves Services).
*/}}
{{- define "jobrelay.hostNetwork" -}}
{{- if .hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- end }}

{{/*
The host the Pod's servers listen on: with `listenOnPodIP` (the default)
only the Pod's IP (a bare IPv6 address too: the binaries read the port after
its last colon), else every address (with hostNetwork, the node's InternalIP
instead of every address the node has). The Pod's IP comes from the
downward API (`POD_IP`, which `jobrelay.podIPEnv` defines first).
*/}}
{{- define "jobrelay.listenHost" -}}
{{- if .listenOnPodIP }}$(POD_IP){{ else }}0.0.0.0{{ end }}
{{- end }}

{{- define "jobrelay.podIPEnv" -}}
{{- if .listenOnPodIP }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end }}
{{- end }}

{{/* The agent's RBAC rules, in its ClusterRole or in a Role per namespace. */}}
{{- define "jobrelay.agentRules" -}}
# What the agent calls, and nothing more: it creates, server-side applies and
# deletes mirror Jobs and watches them; it watches their Pods and deletes the
# ones that outlive their Job (and, when configured, finished Pods); it may
# record Events. It clears `status.startTime` of a mirror suspended after it
# started (the Job controller refuses to resume one that keeps it). Mirror
# Jobs' Pods are created by the worker's Job controller, so the agent never
# creates Pods itself. Where the worker serves JobSets, the agent mirrors them
# the same way (their Jobs are the JobSet controller's, their Pods the Job
# controller's); where it does not, the rule grants nothing. It reads the
# logs of its mirrors' Pods (`pods/log`, get only) when the manager asks for
# them on a user's behalf. With `agent.workerEvents` it reads Warning Events,
# to tell the manager those about its mirrors and their Pods.
rules:
  - apiGroups: ["batch"]
    resources: ["jobs"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["jobset.x-k8s.io"]
    resources: ["jobsets"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["batch"]
    resources: ["jobs/status"]
    verbs: ["patch"]
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get", "list", "watch", "delete"]
  - apiGroups: [""]
    resources: ["pods/log"]
    verbs: ["get"]
  - apiGroups: ["events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
  {{- if .Values.agent.workerEvents }}
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["list", "watch"]
  {{- end }}
{{- end }}

{{/* The admission webhook's serving certificate: the Secret, where it is mounted. */}}
{{- define "jobrelay.webhookSecretName" -}}
{{- .Values.manager.webhook.secretName | default (printf "%s-manager-webhook-tls" (include "jobrelay.fullname" .)) }}
{{- end }}
{{- define "jobrelay.webhookTLSDir" -}}/etc/jobrelay/webhook-tls{{- end }}

{{/* Whether the webhook's certificate comes from a mounted Secret (the
operator's, or cert-manager's); else the manager keeps its own. */}}
{{- define "jobrelay.webhookMounted" -}}
{{- if or .Values.manager.webhook.secretName .Values.manager.webhook.certManager.enabled }}true{{ end }}
{{- end }}

{{/* The Secret in which the manager keeps the webhook's CA and certificate. */}}
{{- define "jobrelay.webhookKeptSecret" -}}
{{- printf "%s-manager-webhook-certs" (include "jobrelay.fullname" .) }}
{{- end }}

{{/* The webhook's Service, and its MutatingWebhookConfiguration and
Certificate, which share its name. */}}
{{- define "jobrelay.webhookService" -}}
{{- printf "%s-manager-webhook" (include "jobrelay.fullname" .) }}
{{- end }}

{{/* The names the API server calls the webhook by, comma-separated. */}}
{{- define "jobrelay.webhookNames" -}}
{{- $service := include "jobrelay.webhookService" . }}
{{- $ns := .Release.Namespace }}
{{- printf "%s.%s.svc,%s.%s.svc.cluster.local" $service $ns $service $ns }}
{{- end }}

{{/* The logs API's Service, and the Secret where the manager keeps its
certificate. */}}
{{- define "jobrelay.visibilityService" -}}
{{- printf "%s-manager-visibility" (include "jobrelay.fullname" .) }}
{{- end }}

{{- define "jobrelay.visibilityKeptSecret" -}}
{{- printf "%s-manager-visibility-certs" (include "jobrelay.fullname" .) }}
{{- end }}

{{/* The names the API server calls the logs API by, comma-separated. */}}
{{- define "jobrelay.visibilityNames" -}}
{{- $service := include "jobrelay.visibilityService" . }}
{{- $ns := .Release.Namespace }}
{{- printf "%s.%s.svc,%s.%s.svc.cluster.local" $service $ns $service $ns }}
{{- end }}
