"""Charts: service data → an Altair (Vega-Lite) chart → SVG, PNG or the Vega-Lite JSON itself."""
