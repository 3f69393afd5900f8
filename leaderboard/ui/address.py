"""The view lives in the address bar (``?tab=slices&track=iconicity&metric=crt&slice=kind&value=moving&models=SDXL``),
so a link restores what its sender saw: the script the page's head carries, and what a tab writes there."""

from __future__ import annotations

import json

import gradio as gr

TABS = ["overview", "slices", "map", "compare", "datasets", "metrics", "arena", "submit", "queue", "about",
        "model"]  # ids = labels, lower case

# The address bar holds the view: a person's own actions (a click on a tab, a change of a control) write it, never
# the page's first paint, so an opened link stays as it was. Each tab remembers its last query for tab clicks. A
# tab click is a step in the browser's history (a control's change is not), so Back and Forward go through the tabs
# a person opened: the tab the address then names is opened again, as the person left it.
HEAD = """
<script>
const TABS = %s;
window.culturelens = {
  memory: {},
  returning: false,  // a tab opened by Back or Forward: the address already names it
  current: null,  // the tab the address names: a late answer to another tab's control does not rewrite it
  write(tab, params) {
    const p = new URLSearchParams();
    p.set('tab', tab);
    // a list (the picked submissions) is written comma-separated; an empty value is left out
    for (const [k, v] of Object.entries(params)) { const text = v == null ? '' : String(v); if (text) p.set(k, text); }
    this.memory[tab] = p.toString();
    if (tab === this.current) history.replaceState(null, '', '?' + this.memory[tab]);
  },
  open(tab) {  // a tab opened from inside the page (the Overview's way in to submit), as a click on it would
    const button = document.querySelector(`[role=tab][data-tab-id="${tab}"]`);
    if (button) button.click(); else location.search = '?tab=' + tab;
  },
};
(() => {
  const opened = new URLSearchParams(location.search);
  // ?model=NAME alone is a model's page (the address its badge links to)
  window.culturelens.current = TABS.includes(opened.get('tab')) ? opened.get('tab')
    : (opened.get('model') ? 'model' : 'overview');
  window.culturelens.memory[window.culturelens.current] = opened.toString();
  const openTab = () => document.querySelector('[role=tab][aria-selected=true]');
  document.addEventListener('click', (event) => {
    // A tab's button, or its entry in the "more tabs" menu of a narrow screen (named by its label only).
    const button = event.target.closest && event.target.closest('[data-tab-id], .overflow-dropdown button');
    const tab = button && (button.dataset.tabId || button.textContent.trim().toLowerCase());
    if (!TABS.includes(tab) || window.culturelens.returning) return;
    const shown = openTab();
    if (shown && shown.dataset.tabId === tab) return;  // the open tab: no new step
    window.culturelens.current = tab;
    history.pushState(null, '', '?' + (window.culturelens.memory[tab] || 'tab=' + tab));
  }, true);
  window.addEventListener('popstate', () => {
    const query = new URLSearchParams(location.search);
    const tab = TABS.includes(query.get('tab')) ? query.get('tab') : 'overview';
    window.culturelens.memory[tab] = location.search.slice(1);
    window.culturelens.current = tab;
    const button = document.querySelector(`[role=tab][data-tab-id="${tab}"]`);
    if (!button) { location.reload(); return; }  // no such tab button (other Gradio markup): draw the link afresh
    window.culturelens.returning = true;
    try { button.click(); } finally { window.culturelens.returning = false; }
  });
})();
</script>
""" % json.dumps(TABS)


def url_js(tab: str, names: list[str]) -> str:
    """JavaScript, run after a person changed a control of ``tab``, that writes the controls ``names`` (in the
    order of the event's inputs) into the address bar."""
    args = ", ".join(names)
    return f"({args}) => window.culturelens.write('{tab}', {{{args}}})"


def url_state(request: gr.Request | None) -> dict:
    """The query of the address the page was opened at, by name; ``?model=NAME`` without a tab names the model's
    page (``tab`` "model")."""
    state = dict(request.query_params) if request is not None else {}
    if "tab" not in state and state.get("model"):
        state["tab"] = "model"
    return state
