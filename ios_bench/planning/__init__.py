"""Planning a sweep: the plan and its validation, the cells, which frameworks run where, the
duration and memory estimates, the options users give."""
