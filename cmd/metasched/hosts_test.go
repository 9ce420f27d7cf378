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
	})
}
