#compdef oasr-convert

_oasr_convert_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _OASR_CONVERT_COMPLETE=complete_zsh oasr-convert)
}

compdef _oasr_convert_completion oasr-convert
