// Package portcheck checks what the compose files publish on the host, with docker-compose's own
// reading of them (`docker-compose config`), and needs no Docker engine: `make test` runs it.
package portcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/zkstock/zkstock/internal/testenv"
)

// internal are the services whose ports must stay on the loopback interface: MySQL (root, no
// password), Redis (no auth) and ZooKeeper (open ACLs) would otherwise answer anyone who can reach
// the machine. The replicas (order1..order3) are the service and are published on every interface.
var internal = map[string]bool{"mysql": true, "redis": true, "zookeeper": true, "zookeeper2": true, "zookeeper3": true}

// published is one port as `docker-compose config` prints it: the long form, or the short one
// ("127.0.0.1:3306:3306/tcp") that docker-compose 1.29 prints when a host address is given.
type published struct {
	HostIP    string
	Published string
	Target    string
}

func (p *published) UnmarshalYAML(unmarshal func(any) error) error {
	var short string
	if err := unmarshal(&short); err == nil {
		spec, _, _ := strings.Cut(short, "/")
		parts := strings.Split(spec, ":")
		switch len(parts) {
		case 1:
			p.Target = parts[0]
		case 2:
			p.Published, p.Target = parts[0], parts[1]
		case 3:
			p.HostIP, p.Published, p.Target = parts[0], parts[1], parts[2]
		default:
			return fmt.Errorf("port %q: not host_ip:published:target", short)
		}
		return nil
	}
	var long struct {
		HostIP    string `yaml:"host_ip"`
		Published any    `yaml:"published"`
		Target    any    `yaml:"target"`
	}
	if err := unmarshal(&long); err != nil {
		return err
	}
	p.HostIP, p.Published, p.Target = long.HostIP, fmt.Sprint(long.Published), fmt.Sprint(long.Target)
	if long.Published == nil {
		p.Published = ""
	}
	return nil
}

func (p published) loopback() bool {
	return p.HostIP == "127.0.0.1" || p.HostIP == "::1" || p.HostIP == "localhost"
}

func composeConfig(t *testing.T, files ...string) map[string][]published {
	t.Helper()
	if _, err := exec.LookPath("docker-compose"); err != nil {
		if testenv.InCI() {
			t.Fatal("docker-compose is not installed (scripts/ensure-tools.sh installs it)")
		}
		t.Skip("docker-compose is not installed: run scripts/ensure-tools.sh")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--project-directory", root}
	for _, f := range files {
		args = append(args, "-f", filepath.Join(root, f))
	}
	cmd := exec.Command("docker-compose", append(args, "--profile", "loadtest", "config")...)
	cmd.Env = append(os.Environ(), "COMPOSE_PROJECT_NAME=portcheck")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker-compose config %v: %v", files, err)
	}
	var cfg struct {
		Services map[string]struct {
			Ports []published `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("read docker-compose config %v: %v\n%s", files, err, out)
	}
	ports := map[string][]published{}
	for name, s := range cfg.Services {
		ports[name] = s.Ports
	}
	return ports
}

// TestInternalPortsOnLoopbackOnly: no database, cache or ZooKeeper port is published on all
// interfaces, in the user's file or with the ensemble override; the replicas stay on 8081..8083.
func TestInternalPortsOnLoopbackOnly(t *testing.T) {
	for _, files := range [][]string{{"docker-compose.yml"}, {"docker-compose.yml", "docker-compose.ensemble.yml"}} {
		t.Run(strings.Join(files, "+"), func(t *testing.T) {
			ports := composeConfig(t, files...)
			for name, ps := range ports {
				for _, p := range ps {
					if internal[name] && !p.loopback() {
						t.Errorf("%s publishes port %s on all interfaces (host_ip %q): publish it as \"127.0.0.1:%s:%s\"",
							name, p.Target, p.HostIP, p.Published, p.Target)
					}
					if internal[name] && p.Published == "" {
						t.Errorf("%s publishes port %s on a random host port", name, p.Target)
					}
				}
			}
			for i, name := range []string{"order1", "order2", "order3"} {
				want := strconv.Itoa(8081 + i)
				ps := ports[name]
				if len(ps) != 1 || ps[0].Published != want || ps[0].Target != "8080" || ps[0].HostIP != "" {
					t.Errorf("%s publishes %+v, want %s:8080 on every interface", name, ps, want)
				}
			}
			for name := range internal {
				if _, ok := ports[name]; !ok && (name == "zookeeper" || name == "mysql" || name == "redis") {
					t.Errorf("service %s is missing", name)
				}
			}
		})
	}
}
