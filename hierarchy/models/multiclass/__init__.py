"""The multiclass logistic regression on a k-component Gaussian mixture (``gmm-multiclass``)."""
