"""Private linear models (output perturbation, bias-reduced SGD, cyclic DP-SGD): to come."""
