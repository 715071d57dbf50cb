# bash completion for canopy (installed as share/bash-completion/completions/canopy).
#
# The candidates come from canopy itself: `canopy __complete WORD...` prints them for the
# last word, from the same tables its --help and manual are made of (commands, each
# command's options, option values, PIDs, canopyd's session ids and names). Two markers
# are expanded here: @files (file names) and @commands (commands, for canopy run).

_canopy() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prog=${COMP_WORDS[0]}
    local line
    local -a out=()
    COMPREPLY=()
    while IFS= read -r line; do
        case $line in
        @files)
            while IFS= read -r f; do out+=("$f"); done < <(compgen -f -- "$cur")
            compopt -o filenames 2>/dev/null
            ;;
        @commands)
            while IFS= read -r f; do out+=("$f"); done < <(compgen -c -- "$cur")
            ;;
        *) out+=("$line") ;;
        esac
    done < <("$prog" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
    COMPREPLY=("${out[@]}")
    return 0
}

complete -F _canopy canopy
