# Sourced by the tour scripts: `show` prints a command as it would be typed (arguments with spaces
# quoted, a trailing "> FILE" shown as a redirection), with the build folder ($bin) and the tour folder
# ($tour) shortened.
show() {
    local line='$'
    for arg in "$@"; do
        case $arg in
            ">"*) line+=" $arg" ;;
            *"'"*) line+=" \"$arg\"" ;;
            *[[:space:]]*) line+=" '$arg'" ;;
            *) line+=" $arg" ;;
        esac
    done
    echo "$line" | sed "s#$bin/##g; s#$tour#\$TOUR#g"
}

# Starts syncd on $tour/node1 and $tour/node2 (their syncd.toml written already), shows node 1's file
# (with `sed` expression $1 applied, if given), waits until both answer, then adds a note on node 1 and
# lists it on node 2 once it arrived. Needs `run` from the calling script.
two_nodes_share_a_note() {
    for n in 1 2; do "$bin/syncd" --config "$tour/node$n/syncd.toml" 2>"$tour/node$n/syncd.log" & done
    echo "\$ cat \$TOUR/node1/syncd.toml"; sed "s#$tour#\$TOUR#g; ${1:-}" "$tour/node1/syncd.toml"; echo
    for n in 1 2; do
        until "$bin/syncctl" status --config "$tour/node$n/syncd.toml" >/dev/null 2>&1; do sleep 0.05; done
    done
    run "$bin/notes" add "Lisbon" --body "written on node 1" --author alice --config "$tour/node1/syncd.toml"
    until "$bin/notes" list --config "$tour/node2/syncd.toml" 2>/dev/null | grep -q Lisbon; do sleep 0.02; done
    run "$bin/notes" list --config "$tour/node2/syncd.toml"
}
