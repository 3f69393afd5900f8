"""The dataset card templates (Jinja Markdown, one per dataset), shipped in the wheel as package data so that
``culturelens data build`` works after ``pip install culturelens`` as in a checkout (``hub_layout.render_card``)."""
