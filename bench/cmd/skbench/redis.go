package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/resp"
	"github.com/shardkeeper/shardkeeper/bench/internal/workload"
)

// redisServer is a redis-server on loopback with every write fsynced before its reply.
type redisServer struct {
	*process
	addr string
}

// findRedis returns the path of redis-server, installing it with apt-get when it is missing
// and we are root. When Redis cannot be had it returns "" and the reason.
func findRedis(ctx context.Context) (string, string) {
	return findOrInstall(ctx, "redis-server", "redis-server", "--skip-redis")
}

// findOrInstall returns the path of the program bin, installing the Debian package pkg with
// apt-get when it is missing and we are root. When it cannot be had it returns "" and the
// reason (skipFlag is the flag that skips the comparison).
func findOrInstall(ctx context.Context, bin, pkg, skipFlag string) (string, string) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, ""
	}
	if os.Geteuid() != 0 {
		return "", fmt.Sprintf("%s is not on PATH and we are not root to install it (apt-get install %s, or pass %s)", bin, pkg, skipFlag)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", bin + " is not on PATH and there is no apt-get to install it"
	}
	logf("%s not found: installing %s with apt-get", bin, pkg)
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	if err := runLogged(ctx, env, "apt-get", "install", "-y", "-q", pkg); err != nil {
		logf("apt-get install failed (%v); updating the package lists and trying again", err)
		if err := runLogged(ctx, env, "apt-get", "update", "-q"); err != nil {
			return "", fmt.Sprintf("apt-get update failed: %v", err)
		}
		if err := runLogged(ctx, env, "apt-get", "install", "-y", "-q", pkg); err != nil {
			return "", fmt.Sprintf("apt-get install %s failed: %v", pkg, err)
		}
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Sprintf("%s still not on PATH after apt-get install %s", bin, pkg)
	}
	return p, ""
}

// startRedis starts bin on a free loopback port with its data in dir: append-only file,
// fsync of every write before the reply (appendfsync always), no RDB snapshots.
func startRedis(ctx context.Context, bin, dir string) (*redisServer, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "",
		"--daemonize", "no", "--logfile", "", "--maxclients", "10000"}
	p, err := startProcess("redis-server", filepath.Join(dir, "redis.log"), bin, args...)
	if err != nil {
		return nil, err
	}
	r := &redisServer{process: p, addr: addr}
	ping := func(ctx context.Context) error {
		c, err := resp.Dial(ctx, addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Do("PING")
		return err
	}
	if err := p.waitFor(ctx, 30*time.Second, "answering PING", ping); err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	c, err := resp.Dial(ctx, addr, time.Second)
	if err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	defer c.Close()
	v, err := c.Do("CONFIG", "GET", "appendfsync")
	if err != nil || len(v.Elems) != 2 || v.Elems[1].Str != "always" {
		p.stop(5 * time.Second)
		return nil, fmt.Errorf("redis-server: appendfsync is not always: %+v, %v", v, err)
	}
	logf("redis-server ready at %s (pid %d, appendonly yes, appendfsync always, data in %s)", addr, p.cmd.Process.Pid, dir)
	return r, nil
}

// loadScript loads workload.ConsumeScript and returns its SHA1 for EVALSHA.
func (r *redisServer) loadScript(ctx context.Context) (string, error) {
	c, err := resp.Dial(ctx, r.addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	v, err := c.Do("SCRIPT", "LOAD", workload.ConsumeScript)
	if err != nil {
		return "", fmt.Errorf("redis: script load: %w", err)
	}
	if v.Str == "" {
		return "", errors.New("redis: script load returned no SHA")
	}
	return v.Str, nil
}
