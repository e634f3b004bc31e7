// A task run as several attempts (`attempts = N`) on its page: the candidates side by side,
// each with its agent, state, checks (a failed one's last lines), review, cost and diff
// (its branch against where the task started), the chosen one marked with the judge's
// `by`, `why` and note. Loaded before app.js, whose helpers (`h`, `section`, `diffTable`,
// ...) it calls only once the page runs.
'use strict';

/** A cost and its share of `total`: `$0.0120 (40%)`. */
function costShare(usd, total) {
  if (usd == null) return fmtCost(usd);
  return total ? `${fmtCost(usd)} (${Math.round((100 * usd) / total)}%)` : fmtCost(usd);
}

/** The task page's Attempts section: {el, badge, update(data)}; hidden for a task run once. */
function AttemptsView(runId, open) {
  const sec = section('attempts', 'Attempts');
  sec.el.hidden = true;
  const head = h('div', { class: 'pick' });
  const grid = h('div', { class: 'attempt-grid' });
  add(sec.body, [head, grid]);
  const diffs = new Map();   // attempt id -> {commit, read: the diff's promise}

  function pickLine(a, total) {
    const p = a.pick;
    const costs = a.costs;
    const spent = costs?.attempts != null
      ? h('p', { class: 'muted small pick-cost' }, `The attempts cost ${fmtCost(costs.attempts)}`,
        p && costs.chosen != null ? `, the chosen one ${fmtCost(costs.chosen)}` : null,
        costs.judge ? `, the judge ${fmtCost(costs.judge)}` : null,
        total != null ? ` — the task ${fmtCost(total)} in all.` : '.')
      : null;
    if (!p) {
      return [h('p', { class: 'pick-line' }, h('strong', null, 'No attempt chosen'),
        h('span', { class: 'muted' }, a.list.some((x) => !['done', 'failed', 'rejected', 'stopped', 'blocked'].includes(x.state))
          ? ' yet: attempts are still going.' : ': none passed.')), spent];
    }
    return [
      h('p', { class: 'pick-line', dataset: { chosen: p.attempt, by: p.by } },
        h('span', { class: 'badge chosen' }, `attempt ${p.attempt} chosen`), ' by ', h('strong', { class: 'pick-by' }, p.by), ': ',
        h('span', { class: 'pick-why' }, withCode(p.why)),
        p.candidates?.length ? h('span', { class: 'muted small' }, ` · candidates: ${p.candidates.map((n) => `#${n}`).join(', ')}`) : null),
      p.note && h('p', { class: 'note pick-note' }, withCode(p.note)),
      spent,
    ];
  }

  function checksList(x) {
    if (!x.checks.length) return emptyNote(x.state === 'stopped' || x.state === 'pending' ? 'No checks ran.' : 'No task checks.');
    return h('ul', { class: 'check-list attempt-checks' }, x.checks.map((c, i) => {
      const cls = c.passed ? 'pass' : 'fail';
      const line = [h('span', { class: 'icon' }, c.passed ? '✓' : '✗'), h('code', null, c.command),
        h('span', { class: 'muted small' }, (c.exit_code != null ? ` exit ${c.exit_code}` : '')
          + (c.passed ? '' : c.as_on_base ? ' · also fails on the base, the same way' : c.at_base ? ' · also fails on the base, otherwise' : ''))];
      return h('li', { class: cls }, c.tail == null ? line
        : details(open, `attempt-${x.n}-check-${i}`, !c.as_on_base, line, h('pre', { class: 'output' }, c.tail || '(no output)')));
    }));
  }

  function reviewLine(x) {
    const r = x.review;
    if (!r) return null;
    return h('div', { class: 'attempt-review' }, verdictBadge(r.verdict), h('span', { class: 'muted small' }, ` by ${r.by || 'reviewer'}`),
      r.summary && h('p', { class: 'prose summary small' }, withCode(r.summary)));
  }

  /** Attempt `x`'s diff, read once for each of its commits. */
  function diffOf(x) {
    let known = diffs.get(x.id);
    if (!known || known.commit !== x.commit) {
      known = { commit: x.commit, read: getJSON(`${taskUrl(runId, x.id)}/diff`).catch((e) => ({ files: [], error: e.message })) };
      diffs.set(x.id, known);
    }
    return known.read;
  }

  function diffEl(x) {
    const holder = h('div', { class: 'attempt-diff', dataset: { loaded: 'false' } });
    if (!x.commit) {
      holder.dataset.loaded = 'true';
      return fill(holder, emptyNote(x.state === 'stopped' || x.state === 'pending' ? 'Not started, or stopped before a commit.' : 'No commit: it changed nothing.'));
    }
    fill(holder, h('span', { class: 'muted small' }, 'Reading the diff…'));
    diffOf(x).then((diff) => showDiff(holder, x, diff));
    return holder;
  }

  function showDiff(holder, x, diff) {
    const files = diff.files || [];
    const added = files.reduce((n, f) => n + (f.added || 0), 0);
    const removed = files.reduce((n, f) => n + (f.removed || 0), 0);
    holder.dataset.loaded = 'true';
    holder.dataset.files = String(files.length);
    fill(holder, diff.error ? emptyNote(`Could not load the diff: ${diff.error}`)
      : details(open, `attempt-${x.n}-diff`, added + removed <= 200,
        [h('span', null, 'Diff '), h('span', { class: 'plus' }, `+${added}`), ' ', h('span', { class: 'minus' }, `−${removed}`),
          h('span', { class: 'muted small' }, ` · ${count(files.length, 'file')} against `, h('code', null, short(diff.base)))],
        files.map((f) => h('div', { class: 'attempt-file', dataset: { path: f.path } },
          h('div', { class: 'attempt-file-head' }, h('span', { class: `kind k-${f.kind}` }, (f.kind || '?')[0].toUpperCase()), ' ',
            h('code', null, f.path)),
          f.binary ? emptyNote('Binary file; not shown.') : f.hunks?.length ? diffTable(f, 'unified', []) : emptyNote('No changes in the text.')))));
  }

  function card(x, total) {
    const u = x.usage;
    const took = x.started_at ? (x.finished_at || Date.now()) - x.started_at : null;
    return h('article', { class: `attempt${x.chosen ? ' chosen' : ''}`, dataset: { attempt: x.n, state: x.state, chosen: x.chosen ? 'true' : 'false' } },
      h('div', { class: 'attempt-head' },
        h('strong', { class: 'mono' }, `#${x.n}`), ' ', stateBadge(x.state),
        x.chosen ? h('span', { class: 'badge chosen' }, 'chosen') : x.candidate ? h('span', { class: 'tag ok', title: 'it passed: the judge could choose it' }, 'candidate') : null),
      h('dl', { class: 'facts' },
        h('dt', null, 'agent'), h('dd', null, x.agent ? h('code', null, x.agent) : h('span', { class: 'muted' }, x.id)),
        h('dt', null, 'branch'), h('dd', null, h('code', null, x.branch)),
        h('dt', null, 'files'), h('dd', null, String(x.files), x.violations ? h('span', { class: 'warn-text' }, ` · ${count(x.violations, 'violation')}`) : null),
        h('dt', null, 'time'), h('dd', null, fmtMs(took)),
        u && [h('dt', null, 'tokens'), h('dd', null, tokensText(u))],
        u && [h('dt', null, 'cost'), h('dd', { class: 'attempt-cost' }, costShare(u.cost_usd, total))]),
      x.note && h('p', { class: `attempt-note${x.chosen ? ' ok' : ''}` }, withCode(x.note)),
      checksList(x),
      reviewLine(x),
      x.summary && h('p', { class: 'muted small attempt-summary' }, withCode(x.summary)),
      diffEl(x));
  }

  function update(d) {
    const a = d.attempts;
    sec.el.hidden = !a;
    if (!a) return;
    const total = a.total_cost_usd ?? null;
    sec.badge.textContent = String(a.list.length);
    fill(head, pickLine(a, total));
    fill(grid, a.list.map((x) => card(x, total)));
  }

  return { el: sec.el, badge: sec.badge, update };
}
