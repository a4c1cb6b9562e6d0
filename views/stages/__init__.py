"""One module per decoder stage section, in the data-flow order of the paper's figure."""
