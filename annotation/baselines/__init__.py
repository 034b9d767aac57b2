"""Human performance baselines: annotators (and the LLM annotator) answer a task's own question
(similarity, label, group, relevance) on a sample of its items."""
