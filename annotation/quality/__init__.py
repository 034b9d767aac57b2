"""Quality of ratings: control items and their pools, detectability, the rater model and carefulness,
agreement (Gwet's AC2), validation, adaptive stopping (confidence sequences) and the gate."""
