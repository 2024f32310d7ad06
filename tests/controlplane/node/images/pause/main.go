// Command pause holds a Pod sandbox's namespaces: it waits until it is told
// to stop (SIGTERM or SIGINT) and exits 0. It is the sandbox image of the
// test kit's real nodes.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of a shared PID namespace it inherits orphans; reap them.
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
