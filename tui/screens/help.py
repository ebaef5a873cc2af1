"""The key reference, over whatever screen is open (? to open, esc / ? / q to close)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

# Markup: "[x]" would be read as a tag and vanish, so it is escaped ("\\[x]").
HELP = """[b]homog[/b] · results database, read-only             esc closes this help
[b]Everywhere[/b]
  1-5      Runs · Compare · Attention · PE lab · SQL (or click the bar)
  tab      next control (shift+tab: previous)     ?  help    q  quit
  r        reload after `homog load` rebuilt the database file
[b]1 Runs[/b]
  /        filter (every word must match)       space  mark a run
  a        mark all shown / none                enter  compare marked runs
[b]2 Compare[/b]
  m / M    next / previous metric (same token set)  d  relative-depth x axis
  t        token set: all / no_sink / standardized (metric__no_sink, ...)
  v        view: all lines / one variant / one model / differences to the
           original (variant − original, one line per contrast)
  n / N    next / previous variant or model (in those views)
  space    in the lists: \\[x] / [ ] a run or a variant
  lines    each numbered on the plot; the legend names it: model ·
           intervention · variant · run id (follows the table's cursor)
  table    #, layer, mean, 95% CI, Holm p vs original;  * = p < 0.05
           ‡ = p at the permutation floor (footnote under the table)
[b]3 Attention[/b]
  top      run, variant, head (or heads averaged)
  arrows   move over the map; the line under it reads the cell
  s        colour scale: square root / linear (also from a dropdown)
  k        curve: sink_rate (share of sink heads) / attn_first
  map      two layers a line (upper / lower half) when they do not fit
[b]4 PE lab[/b]
  enter    on an encoding: show its ablation grid   ◆  deposit head
  s        colour scale; drops are in points of accuracy %
[b]5 SQL[/b]
  ctrl+r   run (also ctrl+j); the results then have the keys
  e        back to the editor                   esc  cancel / leave editor
  n / p    next / previous page of results
  Only reading statements run (SELECT, SHOW, DESCRIBE, EXPLAIN, ...).
  Tables: runs, layer_metrics, layer_summary (means), contrasts, texts,
  attention_profile, attention_heads, dataset_spectra, massive_activations,
  mauve_scores, posenc_results, head_ablation, logit_decomposition.
"""


class HelpScreen(ModalScreen[None]):
    """Keys of every screen."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(HELP, id="help-text")

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)
