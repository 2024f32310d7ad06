// Command workload is what a test Pod on a real node runs: it reports who it
// runs as, optionally checks its environment, sleeps and exits with the code
// it was given.
//
// Flags (each also read from the environment variable in brackets):
//
//	-sleep=2s             how long to run before exiting: a Go duration or
//	                      plain seconds [WORKLOAD_SLEEP]
//	-exit=3               the exit code [WORKLOAD_EXIT]
//	-require-file=PATH    exit 4 unless PATH is a readable, non-empty file [WORKLOAD_REQUIRE_FILE]
//	-read-only-root       exit 5 unless the root filesystem refuses writes [WORKLOAD_READ_ONLY_ROOT]
//	-dial=HOST:PORT       exit 6 unless a TCP connection to HOST:PORT opens [WORKLOAD_DIAL]
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	sleep := seconds(os.Getenv("WORKLOAD_SLEEP"))
	flag.Func("sleep", "how long to run (a Go duration or seconds)", func(value string) error {
		sleep = seconds(value)
		return nil
	})
	exit := flag.Int("exit", envInt("WORKLOAD_EXIT"), "exit code")
	requireFile := flag.String("require-file", os.Getenv("WORKLOAD_REQUIRE_FILE"), "a file that must be readable and non-empty")
	readOnlyRoot := flag.Bool("read-only-root", os.Getenv("WORKLOAD_READ_ONLY_ROOT") == "true", "require a read-only root filesystem")
	dial := flag.String("dial", os.Getenv("WORKLOAD_DIAL"), "an address a TCP connection must open to")
	flag.Parse()

	fmt.Printf("workload: uid=%d gid=%d sleep=%s exit=%d\n", os.Getuid(), os.Getgid(), sleep, *exit)
	if *requireFile != "" {
		content, err := os.ReadFile(*requireFile)
		if err != nil || len(content) == 0 {
			fmt.Printf("workload: %s is not a readable, non-empty file: %v\n", *requireFile, err)
			os.Exit(4)
		}
		fmt.Printf("workload: %s has %d bytes\n", *requireFile, len(content))
	}
	if *readOnlyRoot {
		err := os.WriteFile("/workload-probe", []byte("x"), 0o600)
		if !errors.Is(err, syscall.EROFS) {
			fmt.Printf("workload: writing to / did not fail read-only: %v\n", err)
			os.Exit(5)
		}
		fmt.Println("workload: the root filesystem is read-only")
	}

	if *dial != "" {
		conn, err := net.DialTimeout("tcp", *dial, 5*time.Second)
		if err != nil {
			fmt.Printf("workload: dialing %s: %v\n", *dial, err)
			os.Exit(6)
		}
		fmt.Printf("workload: connected to %s\n", *dial)
		conn.Close()
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-time.After(sleep):
	case s := <-stop:
		fmt.Printf("workload: stopped by %s\n", s)
	}
	fmt.Printf("workload: exiting with %d\n", *exit)
	os.Exit(*exit)
}

// seconds reads "2s", "1m30s" or "2.5" (seconds); anything else is zero.
func seconds(value string) time.Duration {
	if s, err := strconv.ParseFloat(value, 64); err == nil {
		return time.Duration(s * float64(time.Second))
	}
	d, _ := time.ParseDuration(value)
	return d
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}
