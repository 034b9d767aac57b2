"""Studies: their design (pure rules and the researcher's choices), the sampling of items and controls
into a locked study, and the assignment of items to annotators."""
