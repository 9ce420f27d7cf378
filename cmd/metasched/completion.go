package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// bashCompletionFallback defines the two functions of Debian's
// bash-completion package that cobra's bash script calls, when that
// package is not loaded, so that `source <(metasched completion bash)`
// completes in a plain bash too. bash-completion's own are kept when
// present: they also handle words split at = and :.
const bashCompletionFallback = `# Without the bash-completion package, minimal versions of the two of its
# functions this script calls.
if ! declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
_get_comp_words_by_ref() {
    while [[ $# -gt 0 ]]; do
        case $1 in
        -n) shift ;;
        cur) cur=${COMP_WORDS[COMP_CWORD]} ;;
        prev) prev=${COMP_WORDS[COMP_CWORD-1]} ;;
        words) words=("${COMP_WORDS[@]}") ;;
        cword) cword=$COMP_CWORD ;;
        esac
        shift
    done
}
fi
if ! declare -F _filedir >/dev/null 2>&1; then
_filedir() {
    local IFS=$'\n'
    if [[ $1 == -d ]]; then
        COMPREPLY+=($(compgen -d -- "$cur"))
    else
        COMPREPLY+=($(compgen -f -- "$cur"))
    fi
}
fi

`

// completionCmds makes cobra's completion command now, rather than when
// it runs, so that the CLI reference documents it, and makes its bash
// script work without the bash-completion package.
func completionCmds(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		for _, sh := range c.Commands() {
			if sh.Name() != "bash" {
				continue
			}
			run := sh.RunE
			if run == nil {
				inner := sh.Run
				run = func(cmd *cobra.Command, args []string) error { inner(cmd, args); return nil }
			}
			sh.Run = nil
			sh.RunE = func(cmd *cobra.Command, args []string) error {
				if _, err := io.WriteString(cmd.OutOrStdout(), bashCompletionFallback); err != nil {
					return err
				}
				return run(cmd, args)
			}
			sh.Long = strings.Replace(sh.Long, "This script depends on the 'bash-completion' package.\nIf it is not installed already, you can install it via your OS's package manager.",
				"It works in any bash; with Debian's bash-completion package (apt-get install bash-completion)\nit also completes words that hold = or :.", 1)
		}
	}
}
