#compdef oasr

_oasr_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _OASR_COMPLETE=complete_zsh oasr)
}

compdef _oasr_completion oasr
