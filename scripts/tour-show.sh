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
