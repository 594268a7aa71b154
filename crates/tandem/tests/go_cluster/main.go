// go-redis's ClusterClient against `tandem up --redis-cluster`, built by .ci/setup into
// target/go-cluster-client and run by redis_cluster.rs.
//
// Usage: go-cluster-client ADDRESS SECONDS [plant]
//
// Starts from one node's RESP address (a backup, say), learns the primary from the cluster's
// slots, and writes distinct keys (SET is idempotent, so the client's own retry after a lost
// connection repeats nothing) for SECONDS while the test kills the primary. go-redis goes on
// sending to a primary that died until a redirection or its ten-second refresh of the slots
// tells it of the new one, so its calls fail meanwhile: the report counts them, and the
// writes acknowledged after the last failure. Then a new client reads every key the first
// was told was written. Prints one JSON line. `plant` counts its first key written without
// writing it, so that the test can see the check catch a lost write.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

type report struct {
	Acknowledged           int      `json:"acknowledged"`
	AcknowledgedAfterError int      `json:"acknowledged_after_last_error"`
	Wrong                  []string `json:"wrong"`
	WrongCount             int      `json:"wrong_count"`
	Errors                 []string `json:"errors"`
	ErrorCount             int      `json:"error_count"`
}

func cluster(address string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       []string{address},
		ReadTimeout: 5 * time.Second,
	})
}

func main() {
	if len(os.Args) != 3 && !(len(os.Args) == 4 && os.Args[3] == "plant") {
		fmt.Fprintln(os.Stderr, "usage: go-cluster-client ADDRESS SECONDS [plant]")
		os.Exit(2)
	}
	plant := len(os.Args) == 4
	seconds, err := strconv.ParseFloat(os.Args[2], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "SECONDS:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	client := cluster(os.Args[1])
	var out report
	written := map[string]string{}
	keys := []string{}
	started := time.Now()
	for i := 0; time.Since(started).Seconds() < seconds; i++ {
		key, value := fmt.Sprintf("go:{%d}:%d", i%97, i), strconv.Itoa(i)
		if plant && i == 0 {
			key = "go:planted"
			written[key] = value
			keys = append(keys, key)
			continue
		}
		if err := client.Set(ctx, key, value, 0).Err(); err != nil {
			out.ErrorCount++
			out.AcknowledgedAfterError = 0
			if len(out.Errors) < 10 {
				out.Errors = append(out.Errors, err.Error())
			}
			continue
		}
		written[key] = value
		keys = append(keys, key)
		out.AcknowledgedAfterError++
	}
	client.Close()
	reader := cluster(os.Args[1])
	defer reader.Close()
	for _, key := range keys {
		got, err := reader.Get(ctx, key).Result()
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != written[key] {
			out.WrongCount++
			if len(out.Wrong) < 10 {
				out.Wrong = append(out.Wrong, key+" = "+got)
			}
		}
	}
	out.Acknowledged = len(keys)
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
