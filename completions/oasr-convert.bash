_oasr_convert_completion() {
    local IFS=$'
'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \
                   COMP_CWORD=$COMP_CWORD \
                   _OASR_CONVERT_COMPLETE=complete_bash $1 ) )
    return 0
}

complete -o default -F _oasr_convert_completion oasr-convert
