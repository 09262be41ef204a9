package pgtest

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// dockerImage is the server image started when Docker is available.
const dockerImage = "postgres:16-alpine"

// dockerReachable reports, within a fraction of a second and without
// output, whether a Docker engine answers on DOCKER_HOST or a usual socket.
func dockerReachable() bool {
	var addrs [][2]string
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		if err != nil {
			return false
		}
		switch u.Scheme {
		case "unix":
			addrs = append(addrs, [2]string{"unix", u.Path})
		case "tcp":
			addrs = append(addrs, [2]string{"tcp", u.Host})
		default:
			return false
		}
	} else {
		addrs = append(addrs, [2]string{"unix", "/var/run/docker.sock"})
		if home, err := os.UserHomeDir(); err == nil {
			addrs = append(addrs, [2]string{"unix", filepath.Join(home, ".docker", "run", "docker.sock")})
		}
	}
	for _, a := range addrs {
		if a[0] == "unix" {
			if _, err := os.Stat(a[1]); err != nil {
				continue
			}
		}
		c, err := net.DialTimeout(a[0], a[1], 300*time.Millisecond)
		if err == nil {
			c.Close()
			return true
		}
	}
	return false
}

// startContainer starts a PostgreSQL container; testcontainers' reaper
// removes it when the test process ends.
func startContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctr, err := tcpostgres.Run(ctx, dockerImage,
		tcpostgres.WithDatabase("waggle"), tcpostgres.WithUsername("waggle"), tcpostgres.WithPassword("waggle"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return "", err
	}
	return ctr.ConnectionString(ctx, "sslmode=disable")
}
