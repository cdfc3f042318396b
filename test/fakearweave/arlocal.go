package fakearweave

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// The live cross-checks against the ecosystem's own code (make arweave-crosscheck) run arlocal,
// the local Arweave node of the npm ecosystem, and arweave-js from the packages installed in
// the crosscheck folder beside this file. They need Node and `npm ci` in that folder.

// CrossCheckEnv is the variable that turns the live cross-checks on.
const CrossCheckEnv = "SHARDKEEPER_ARWEAVE_CROSSCHECK"

// CrossCheckDir is the folder holding the cross-checks' scripts and npm packages.
func CrossCheckDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "crosscheck")
}

// RequireCrossCheck skips t unless the live cross-checks are on, and fails it when they are on
// but the npm packages are not installed.
func RequireCrossCheck(t testing.TB) {
	t.Helper()
	if os.Getenv(CrossCheckEnv) == "" {
		t.Skipf("set %s=1 (make arweave-crosscheck)", CrossCheckEnv)
	}
	if _, err := os.Stat(filepath.Join(CrossCheckDir(), "node_modules")); err != nil {
		t.Fatalf("%s/node_modules is missing: run npm ci there", CrossCheckDir())
	}
}

// Node runs a script of the crosscheck folder with Node and returns what it printed.
func Node(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", append([]string{filepath.Join(CrossCheckDir(), script)}, args...)...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %s %v: %v\n%s", script, args, err, stderr)
	}
	return out
}

// Arlocal is an arlocal node run for one test.
type Arlocal struct {
	URL string
}

// StartArlocal runs arlocal until t ends; it fails t when arlocal does not come up within a
// minute, with what arlocal wrote to stderr.
func StartArlocal(t testing.TB) *Arlocal {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", filepath.Join(CrossCheckDir(), "arlocal.mjs"), fmt.Sprint(port))
	cmd.Dir = t.TempDir() // arlocal keeps its database in the working directory
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start arlocal: %v", err)
	}
	// The reader owns stdout until it ends (arlocal exited), and only then may Wait run.
	ready, read := make(chan bool, 1), make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		up := false
		for !up && sc.Scan() {
			up = sc.Text() == "ready"
		}
		ready <- up
		_, _ = io.Copy(io.Discard, stdout)
	}()
	// stop closes arlocal's stdin, which makes it stop; one that has not exited 10 s later
	// is killed.
	stop := func() {
		stdin.Close()
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-read
		}
		_ = cmd.Wait()
	}
	select {
	case up := <-ready:
		if !up {
			stop()
			t.Fatalf("arlocal exited before it was ready:\n%s", stderr.String())
		}
	case <-time.After(time.Minute):
		stop()
		t.Fatalf("arlocal not ready after a minute:\n%s", stderr.String())
	}
	t.Cleanup(stop)
	return &Arlocal{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// Get asks arlocal for path and fails t unless it answers 200; it returns the body.
func (a *Arlocal) Get(t testing.TB, path string) []byte {
	t.Helper()
	b, err := a.get(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// get asks arlocal for path; an answer other than 200 is an error.
func (a *Arlocal) get(path string) ([]byte, error) {
	resp, err := http.Get(a.URL + path)
	if err != nil {
		return nil, fmt.Errorf("arlocal GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("arlocal GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b, nil
}

// Mint gives address winston to spend.
func (a *Arlocal) Mint(t testing.TB, address string) {
	a.Get(t, "/mint/"+address+"/100000000000000000")
}

// Mine mines one block holding every pending transaction. It fails when arlocal does: it
// unpacks a bundle posted by chunks both in the background of the post and when mining, and
// when the two race, the block is not mined (the next attempt mines it).
func (a *Arlocal) Mine() error {
	_, err := a.get("/mine")
	return err
}

// Indexed is what arlocal's GraphQL says of one transaction or data item. (arlocal does not
// resolve a data item's bundledIn.)
type Indexed struct {
	Tags map[string]string // its tags by name
}

// Indexed asks arlocal's GraphQL about id; it fails t when arlocal has not indexed it.
func (a *Arlocal) Indexed(t testing.TB, id string) Indexed {
	t.Helper()
	q, _ := json.Marshal(map[string]string{"query": `query { transactions(ids: ["` + id + `"]) { edges { node { id tags { name value } } } } }`})
	resp, err := http.Post(a.URL+"/graphql", "application/json", bytes.NewReader(q))
	if err != nil {
		t.Fatalf("arlocal GraphQL: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Transactions struct {
				Edges []struct {
					Node struct {
						ID   string                         `json:"id"`
						Tags []struct{ Name, Value string } `json:"tags"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"transactions"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("arlocal GraphQL about %s: %d %v", id, resp.StatusCode, err)
	}
	edges := out.Data.Transactions.Edges
	if len(edges) != 1 || edges[0].Node.ID != id {
		t.Fatalf("arlocal has not indexed %s (%d answers)", id, len(edges))
	}
	ix := Indexed{Tags: map[string]string{}}
	for _, tag := range edges[0].Node.Tags {
		ix.Tags[tag.Name] = tag.Value
	}
	return ix
}
