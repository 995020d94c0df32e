"""Reading runs back for people: the report and its tables, compare and drift, plots, the one
number formatter, escaping."""
