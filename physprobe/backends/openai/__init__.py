"""The ``openai`` backend: a model behind any OpenAI-compatible server, scored over HTTP. ``client`` speaks to the
server (its options, retries and pool), ``parsing`` checks each of its answers, ``backend`` turns physprobe's
requests into the server's requests and their answers into results."""
