// Command loadgen replays Alertmanager webhook bodies against alertd at a fixed
// (open-loop) rate and prints one JSON line of results.
//
// Bodies come from a file with one JSON document per line (bench/ingest.py
// writes them); each line is sent at most once, in order. Requests are started
// on schedule whether or not earlier ones have finished, over a fixed pool of
// keep-alive connections, and latency is measured from the scheduled start
// time, so a server that falls behind shows up as latency, not as a lower
// offered rate (no coordinated omission). Service time (from the moment a
// connection picked the request up) is reported too.
//
// Bounded in count (-n, or the number of lines) and in time (-duration, plus
// -timeout for the stragglers). Loopback only is enforced: -url must point at
// 127.0.0.1, ::1 or localhost.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

type result struct {
	latency time.Duration // from scheduled start
	service time.Duration // from pickup by a connection
	status  int
	err     string
}

type summary struct {
	Rate        float64            `json:"rate_target"`
	Sent        int                `json:"sent"`
	OK          int                `json:"ok"`
	Errors      map[string]int     `json:"errors"`
	Elapsed     float64            `json:"elapsed_s"`
	Achieved    float64            `json:"achieved_per_s"`
	OKPerSecond float64            `json:"ok_per_s"`
	Behind      int                `json:"late_starts"`
	LatencyMs   map[string]float64 `json:"latency_ms"`
	ServiceMs   map[string]float64 `json:"service_ms"`
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i].Microseconds()) / 1000.0
}

func dist(values []time.Duration) map[string]float64 {
	sort.Slice(values, func(a, b int) bool { return values[a] < values[b] })
	out := map[string]float64{"p50": percentile(values, 0.50), "p90": percentile(values, 0.90),
		"p99": percentile(values, 0.99), "p999": percentile(values, 0.999), "max": percentile(values, 1)}
	var sum time.Duration
	for _, v := range values {
		sum += v
	}
	if len(values) > 0 {
		out["mean"] = float64((sum / time.Duration(len(values))).Microseconds()) / 1000.0
	}
	return out
}

func readBodies(path string, limit int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	r := bufio.NewReaderSize(f, 1<<20)
	for limit <= 0 || len(out) < limit {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			out = append(out, line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func main() {
	target := flag.String("url", "http://127.0.0.1:9095/api/v1/alerts/alertmanager", "receiver URL (loopback only)")
	bodiesPath := flag.String("bodies", "", "file with one webhook JSON document per line")
	rate := flag.Float64("rate", 1000, "webhooks per second to start (open loop)")
	duration := flag.Duration("duration", 10*time.Second, "how long to send")
	conns := flag.Int("conns", 64, "keep-alive connections (concurrent requests)")
	n := flag.Int("n", 0, "send at most this many bodies (0 = rate*duration, capped by the file)")
	timeout := flag.Duration("timeout", 30*time.Second, "per-request timeout")
	token := flag.String("token", "", "bearer token")
	closed := flag.Bool("closed", false, "closed loop: each connection sends its next body as soon as the previous one was answered (-rate only sizes the body count; latency is service time)")
	flag.Parse()

	u, err := url.Parse(*target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad -url:", err)
		os.Exit(2)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "::1" && h != "localhost" {
		fmt.Fprintln(os.Stderr, "refusing a non-loopback -url:", *target)
		os.Exit(2)
	}
	total := int(*rate * duration.Seconds())
	if *n > 0 && *n < total {
		total = *n
	}
	bodies, err := readBodies(*bodiesPath, total)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading bodies:", err)
		os.Exit(2)
	}
	if len(bodies) < total {
		total = len(bodies)
	}
	if total == 0 {
		fmt.Fprintln(os.Stderr, "no bodies to send")
		os.Exit(2)
	}

	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        *conns,
		MaxIdleConnsPerHost: *conns,
		MaxConnsPerHost:     *conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: transport, Timeout: *timeout}

	start := time.Now()
	type job struct {
		i         int
		scheduled time.Time
	}
	jobs := make(chan job, total)
	results := make([]result, total)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), *duration+*timeout+5*time.Second)
	defer cancel()
	for w := 0; w < *conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				picked := time.Now()
				if *closed {
					if picked.Sub(start) > *duration {
						results[j.i] = result{err: "skipped"}
						continue
					}
					j.scheduled = picked
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, *target, bytes.NewReader(bodies[j.i]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("User-Agent", "Alertmanager/0.28.1")
				if *token != "" {
					req.Header.Set("Authorization", "Bearer "+*token)
				}
				resp, err := client.Do(req)
				done := time.Now()
				r := result{latency: done.Sub(j.scheduled), service: done.Sub(picked)}
				if err != nil {
					r.err = "transport"
				} else {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.status = resp.StatusCode
				}
				results[j.i] = r
			}
		}()
	}

	interval := time.Duration(float64(time.Second) / *rate)
	behind := 0
	for i := 0; *closed && i < total; i++ {
		jobs <- job{i: i}
	}
	for i := 0; !*closed && i < total; i++ {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		} else if d < -10*time.Millisecond {
			behind++
		}
		if time.Since(start) > *duration+time.Second {
			total = i
			break
		}
		jobs <- job{i: i, scheduled: at}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)

	s := summary{Rate: *rate, Sent: total, Errors: map[string]int{}, Elapsed: elapsed.Seconds(), Behind: behind}
	var lat, svc []time.Duration
	for _, r := range results[:total] {
		switch {
		case r.err == "skipped":
			s.Sent--
			continue
		case r.err != "":
			s.Errors[r.err]++
		case r.status >= 200 && r.status < 300:
			s.OK++
			lat = append(lat, r.latency)
			svc = append(svc, r.service)
		default:
			s.Errors[strconv.Itoa(r.status)]++
		}
	}
	if *closed && elapsed > *duration {
		elapsed = *duration // the stragglers' skip pass is not sending time
	}
	s.Achieved = float64(s.Sent) / elapsed.Seconds()
	s.OKPerSecond = float64(s.OK) / elapsed.Seconds()
	s.LatencyMs = dist(lat)
	s.ServiceMs = dist(svc)
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
}
