"""The operator performance dataset (collect, fit, show); see ``ios-bench ops --help``."""
