"""Loss weights: per-token weights of the objective's loss, computed on each minibatch of the update."""
