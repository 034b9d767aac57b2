"""The pure science of validation studies: no Django, no I/O, only data in and frozen results out.
A study's design and its rules, the sampling of items and their assignment to annotators; the
quality of ratings (control items and checks, detectability, the rater model and carefulness,
agreement, validation flags), the gate and the sequential tests behind adaptive stopping and their
savings forecast; the study's figures as plain SVG. ``annotation.studies`` runs these on stored
studies; the property tests aim here."""
