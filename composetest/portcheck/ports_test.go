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
var internal = map[string]bool{"mysql": true, "redis": true, "zookeeper": true, "zookeeper2": true, "zookeeper3": true, "galera2": true, "galera3": true}

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
	ports, _ := composeConfigEnv(t, nil, files...)
	return ports
}

// composeConfigEnv is composeConfig with variables added to the environment docker-compose reads
// the files with; it also returns each service's user.
func composeConfigEnv(t *testing.T, env []string, files ...string) (map[string][]published, map[string]string) {
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
	cmd.Env = append(append(os.Environ(), "COMPOSE_PROJECT_NAME=portcheck"), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker-compose config %v: %v", files, err)
	}
	var cfg struct {
		Services map[string]struct {
			Ports []published `yaml:"ports"`
			User  string      `yaml:"user"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("read docker-compose config %v: %v\n%s", files, err, out)
	}
	ports, users := map[string][]published{}, map[string]string{}
	for name, s := range cfg.Services {
		ports[name], users[name] = s.Ports, s.User
	}
	return ports, users
}

// TestInternalPortsOnLoopbackOnly: no database, cache or ZooKeeper port is published on all
// interfaces, in the user's file or with the ensemble or Galera override; the replicas stay on
// 8081..8083.
func TestInternalPortsOnLoopbackOnly(t *testing.T) {
	for _, files := range [][]string{{"docker-compose.yml"}, {"docker-compose.yml", "docker-compose.ensemble.yml"}, {"docker-compose.yml", "docker-compose.galera.yml"}} {
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

// hostPorts are the variables that move each published host port, with today's port as default.
var hostPorts = []struct {
	service, variable, def string
}{
	{"zookeeper", "ZK_HOST_PORT", "2181"},
	{"mysql", "MYSQL_HOST_PORT", "3306"},
	{"redis", "REDIS_HOST_PORT", "6379"},
	{"order1", "ORDER1_HOST_PORT", "8081"},
	{"order2", "ORDER2_HOST_PORT", "8082"},
	{"order3", "ORDER3_HOST_PORT", "8083"},
	{"zookeeper2", "ZK2_HOST_PORT", "2182"},
	{"zookeeper3", "ZK3_HOST_PORT", "2183"},
}

// TestHostPortsSettable: a local MySQL, Redis or ZooKeeper on the default port need not collide
// with the stack: every published host port follows its variable, keeps its interface, and is
// today's port when the variable is unset. LOADTEST_USER picks who writes ./out (root by default).
func TestHostPortsSettable(t *testing.T) {
	files := []string{"docker-compose.yml", "docker-compose.ensemble.yml"}
	env := []string{"LOADTEST_USER=1234:5678"}
	for i, hp := range hostPorts {
		env = append(env, fmt.Sprintf("%s=%d", hp.variable, 40001+i))
	}
	unset := []string{}
	for _, hp := range hostPorts {
		unset = append(unset, hp.variable+"=") // empty counts as unset with ${VAR:-default}
	}
	unset = append(unset, "LOADTEST_USER=")
	defaults, defaultUsers := composeConfigEnv(t, unset, files...)
	moved, movedUsers := composeConfigEnv(t, env, files...)
	for i, hp := range hostPorts {
		want := strconv.Itoa(40001 + i)
		d, m := defaults[hp.service], moved[hp.service]
		if len(d) != 1 || d[0].Published != hp.def {
			t.Errorf("%s with %s unset publishes %+v, want host port %s", hp.service, hp.variable, d, hp.def)
		}
		if len(m) != 1 || m[0].Published != want {
			t.Errorf("%s with %s=%s publishes %+v, want host port %s", hp.service, hp.variable, want, m, want)
			continue
		}
		if len(d) == 1 && (m[0].HostIP != d[0].HostIP || m[0].Target != d[0].Target) {
			t.Errorf("%s: moving the host port changed the interface or the target: %+v, was %+v", hp.service, m[0], d[0])
		}
	}
	if defaultUsers["loadtest"] != "root" || movedUsers["loadtest"] != "1234:5678" {
		t.Errorf("loadtest runs as %q by default and %q with LOADTEST_USER=1234:5678; want root and 1234:5678",
			defaultUsers["loadtest"], movedUsers["loadtest"])
	}
}
