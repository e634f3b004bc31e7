// Steering a running task from its page, as `plait tell` and `plait stop` do: a box to tell
// its agent something (a model agent hears it at its next turn, others as their next
// round's comment) and a Stop button, with a choice to keep its work so far. Both show
// while the task can still be steered (`steerable`: its run goes on and it has not ended);
// the messages told stay listed with where each came from, how it reaches the agent and
// whether it was heard (the server's words, `heard`). Loaded before app.js, whose helpers
// (`h`, `act`, `post`, ...) it calls only once the page runs.
'use strict';

/** The task page's Steer panel: {el, update(data)}; hidden while there is nothing to show. */
function SteerView(runId, taskId, refresh) {
  const list = h('ul', { class: 'comments told-list' });
  const text = h('textarea', { id: 'tell-text', rows: 3, placeholder: 'Tell its agent something now: a model agent hears it at its next turn, others as their next round\'s comment.' });
  const tellB = h('button', { type: 'button', id: 'tell', class: 'btn' }, '✉ Tell');
  const keep = h('input', { type: 'checkbox', id: 'stop-keep' });
  const stopB = h('button', { type: 'button', id: 'stop', class: 'btn danger' }, '■ Stop');
  const outcome = h('div', { id: 'steer-outcome', class: 'outcome', hidden: true, role: 'status' });
  const buttons = [tellB, stopB];
  const form = h('div', { class: 'steer-form' },
    h('label', { for: 'tell-text', class: 'small muted' }, 'Tell its agent'), text,
    h('div', { class: 'action-row' }, tellB),
    h('div', { class: 'action-row steer-stop' }, stopB,
      h('label', { for: 'stop-keep', class: 'small', title: 'collect its work so far and judge it by its checks and reviewer, instead of leaving it out of the merge' },
        keep, ' keep its work')));
  const title = h('h2', null, 'Steer');
  const el = h('section', { id: 'steer', class: 'panel actions', hidden: true }, title, list, form, outcome);

  const steer = (action, body) => act(buttons, outcome, () => post(`${taskUrl(runId, taskId)}/${action}`, body), async (res) => {
    if (res.ok && action === 'tell') text.value = '';
    await refresh();
  });
  tellB.onclick = () => {
    const message = text.value.trim();
    text.classList.toggle('invalid', !message);
    if (!message) {
      showOutcome(outcome, { ok: false, data: { error: 'Write a message first: it is what the agent is told.' } });
      text.focus();
      return;
    }
    steer('tell', { message });
  };
  stopB.onclick = () => steer('stop', { keep: keep.checked });
  text.addEventListener('input', () => text.classList.remove('invalid'));

  function item(m) {
    return h('li', { class: 'told', dataset: { heard: m.heard_at != null ? 'true' : 'false' } },
      h('div', { class: 'comment-body' }, m.text),
      h('span', { class: 'muted small told-meta' },
        m.to ? [h('code', null, m.to), ' · '] : null,
        `told from the ${m.by} `, h('span', { title: fmtDate(m.at) }, fmtAgo(m.at)),
        ` · ${m.way} · `, h('span', { class: 'told-heard' }, m.heard)));
  }

  function update(d) {
    const told = d.told || [];
    fill(list, told.map(item));
    list.hidden = !told.length;
    form.hidden = !d.steerable;
    title.textContent = d.steerable ? 'Steer' : 'Told while it ran';
    // A stop ends the task: its answer stays in view though the form goes.
    el.hidden = !told.length && !d.steerable && outcome.hidden;
  }

  return { el, update };
}
