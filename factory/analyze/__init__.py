"""`factory analyze`: trajectories -> capability labels -> contrastive statistics -> specs."""
