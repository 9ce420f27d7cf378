package main

import (
	"net/url"
	"testing"

	"github.com/metasched/metasched/metasched/api"
)

func TestPoolCommands(t *testing.T) {
	pools := daemonRoute{Method: "GET", Path: "/v1/pools", Answer: fixturePools}
	policy := daemonRoute{Method: "GET", Path: "/v1/policy", Answer: fixturePolicy}
	active := daemonRoute{Method: "GET", Path: "/v1/switches", Query: url.Values{"active": {"true"}}, Answer: api.SwitchList{Switches: []api.SwitchView{switchActive}}}
	all := daemonRoute{Method: "GET", Path: "/v1/switches", Answer: api.SwitchList{Switches: switchesAll}}
	page := daemonRoute{Method: "GET", Path: "/v1/switches", Query: url.Values{"before": {"s-000004"}, "limit": {"2"}},
		Answer: api.SwitchList{Switches: switchesAll[:2], Next: switchesAll[1].ID}}
	quiet := api.PolicyView{Configured: "heuristic", InForce: "heuristic", Pools: fixturePolicy.Pools, Servers: 6}
	runDaemonCases(t, []daemonCase{
		{name: "pools", args: []string{"pools"}, routes: []daemonRoute{pools}},
		{name: "pools-json", args: []string{"pools", "--output", "json"}, routes: []daemonRoute{pools}, want: fixturePools},
		{name: "switches", args: []string{"switches"}, routes: []daemonRoute{active}},
		{name: "switches-all", args: []string{"switches", "--all"}, routes: []daemonRoute{all}},
		{name: "switches-json", args: []string{"switches", "--all", "--output", "json"}, routes: []daemonRoute{all}, want: api.SwitchList{Switches: switchesAll}},
		{name: "switches-page", args: []string{"switches", "--all", "--before", "s-000004", "--limit", "2"}, routes: []daemonRoute{page}},
		{name: "switch-start", args: []string{"switches", "start", "render", "sim"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/switches", Body: ptr(`{"from":"render","to":"sim"}`), Status: 202, Answer: switchActive}}},
		{name: "status", args: []string{"status"}, routes: []daemonRoute{pools, policy, active}},
		{name: "status-quiet", args: []string{"status"}, routes: []daemonRoute{pools,
			{Method: "GET", Path: "/v1/policy", Answer: quiet},
			{Method: "GET", Path: "/v1/switches", Query: url.Values{"active": {"true"}}, Answer: api.SwitchList{Switches: []api.SwitchView{}}}}},
		{name: "status-json", args: []string{"status", "--output", "json"}, routes: []daemonRoute{pools, policy, active},
			want: daemonStatus{Pools: fixturePools, Policy: fixturePolicy, Switches: []api.SwitchView{switchActive}}},
	})
}
