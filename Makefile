# The two set-up commands of the README:
#   make demo   builds metasched and runs the main job on the built-in defaults
#   make test   runs every test
# Go fetches the modules it needs from the module proxy on the first build.

GO  ?= go
BIN := bin/metasched

.PHONY: build demo test bench

build:
	$(GO) build -o $(BIN) ./cmd/metasched

demo: build
	$(BIN) plan --job examples/job-render.yaml --grid examples/grid-paper.yaml
	@echo
	$(BIN) plan --job examples/job-render.yaml --grid examples/grid-paper.yaml --master latam-a
	@echo
	$(BIN) policy solve --model examples/palmer-table2.yaml --criterion discounted
	@echo
	$(BIN) policy papers
	@echo
	$(BIN) simulate policies --model examples/fisher-fig4-load3.4.yaml --policy heuristic --K 5
	@echo
	$(BIN) simulate policies --model examples/fisher-fig4-load3.4.yaml --policy static

test:
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./switching/... ./graph ./selection/...
