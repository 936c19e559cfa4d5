"""What an agent's run is, as analysis and the archetypes' detectors read it: the
trajectory records (`records`), a detector's judgement (`labels`) and the evidence
helpers detectors share (`evidence`). Below both `factory.analyze` and
`factory.archetypes`, so neither imports the other to reach them."""
