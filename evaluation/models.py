"""Models of this app arrive with the issues that build it (see README, "Roadmap")."""
