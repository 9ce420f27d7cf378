package main

import "testing"

func TestHostCommands(t *testing.T) {
	hosts := daemonRoute{Method: "GET", Path: "/v1/hosts", Answer: fixtureHosts}
	clear := daemonRoute{Method: "POST", Path: "/v1/hosts/lb-3/clear", Body: ptr("{}"), Answer: clearedHost}
	runDaemonCases(t, []daemonCase{
		{name: "hosts", args: []string{"hosts"}, routes: []daemonRoute{hosts}},
		{name: "hosts-json", args: []string{"hosts", "--output", "json"}, routes: []daemonRoute{hosts}, want: fixtureHosts},
		{name: "hosts-clear", args: []string{"hosts", "clear", "lb-3"}, routes: []daemonRoute{clear}},
		{name: "hosts-clear-pool", args: []string{"hosts", "clear", "lb-3", "--pool", "sim"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/hosts/lb-3/clear", Body: ptr(`{"pool":"sim"}`), Answer: clearedHost}}},
		{name: "hosts-clear-json", args: []string{"hosts", "clear", "lb-3", "--output", "json"}, routes: []daemonRoute{clear}, want: clearedHost},
		{name: "hosts-drain", args: []string{"hosts", "drain", "es-1"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/hosts/es-1/drain", Body: ptr("{}"), Answer: drainingHost}}},
		{name: "hosts-drain-move", args: []string{"hosts", "drain", "es-1", "--move"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/hosts/es-1/drain", Body: ptr(`{"move":true}`), Answer: drainedHost}}},
		{name: "hosts-drain-json", args: []string{"hosts", "drain", "es-1", "--output", "json"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/hosts/es-1/drain", Body: ptr("{}"), Answer: drainingHost}}, want: drainingHost},
		{name: "hosts-undrain", args: []string{"hosts", "undrain", "es-1"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/hosts/es-1/undrain", Answer: fixtureHosts[0]}}},
	})
}
