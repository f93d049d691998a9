"""``runnel dashboard``: a live web page of what ``runnel status`` and ``runnel jobs info`` show."""
