// The programs in the test kit's own container images: the Pod sandbox's
// pause and a workload whose run time and exit code a test chooses.
// Standard library only.
module jobrelay.dev/tests/controlplane/node/images

go 1.24.0
