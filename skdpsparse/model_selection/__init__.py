"""Private model selection (private selection with random stopping): to come."""
