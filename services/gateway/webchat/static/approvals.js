// Approvals: the inline card, the decision, and the pending list that
// survives a reload and shows other tabs' and clients' approvals.

import { api, enc } from './api.js';
import { $, button, el, pretty, showError } from './dom.js';
import { noticeApprovals } from './notify.js';
import { state } from './state.js';

// ---- approvals -----------------------------------------------------

const decisions = {
  once: { approved: true, always: false, label: 'Allowed once' },
  always: { approved: true, always: true, label: 'Always allowed' },
  deny: { approved: false, always: false, label: 'Denied' },
};

export function approvalCard(requestId, toolName, input, sourceWorkspaceId) {
  const card = el('div', 'approval');
  card.dataset.requestId = requestId;
  card.dataset.created = String(performance.now());
  if (sourceWorkspaceId) card.dataset.sourceWorkspaceId = sourceWorkspaceId;
  card.append(el('div', 'approval-title', 'Allow ' + (toolName || 'this tool') + '?'));
  card.append(el('pre', 'approval-input', pretty(input)));
  const actions = el('div', 'approval-actions');
  const outcome = el('div', 'approval-outcome');
  const answered = state.answered.get(requestId);
  if (answered) outcome.textContent = answered;
  else {
    actions.append(
      button('Allow once', 'allow-once primary', () => decide(requestId, 'once', sourceWorkspaceId)),
      button('Always allow', 'allow-always', () => decide(requestId, 'always', sourceWorkspaceId)),
      button('Deny', 'deny danger', () => decide(requestId, 'deny', sourceWorkspaceId)),
    );
  }
  card.append(actions, outcome);
  return card;
}

async function decide(requestId, kind, sourceWorkspaceId) {
  const d = decisions[kind];
  const body = { approved: d.approved, always: d.always };
  if (sourceWorkspaceId) body.sourceWorkspaceId = sourceWorkspaceId;
  let label = d.label;
  try {
    await api('POST', '/api/approval/' + enc(requestId), body);
  } catch (err) {
    if (err.status !== 409 && err.status !== 404) {
      showError(err);
      return;
    }
    label = err.status === 409 ? 'Already decided' : 'No longer pending';
  }
  markAnswered(requestId, label);
  refreshApprovals();
}

// markAnswered shows the outcome of an approval on its cards. final:
// the outcome is known (decided here, or the turn ended without it); a
// card that just left the pending list gets a provisional label that a
// final one replaces.
export function markAnswered(requestId, label, final = true) {
  if (final) state.answered.set(requestId, label);
  document.querySelectorAll('.approval').forEach(card => {
    if (card.dataset.requestId !== requestId) return;
    card.querySelector('.approval-actions').replaceChildren();
    card.querySelector('.approval-outcome').textContent = label;
    card.classList.add('answered');
  });
}

export async function refreshApprovals() {
  const started = performance.now();
  let r;
  try {
    r = await api('GET', '/api/approval/pending');
  } catch (_) {
    return; // shown by the calls the user made; polling stays quiet
  }
  state.pending = r.pending || [];
  noticeApprovals(state.pending);
  const ids = new Set(state.pending.map(p => p.requestId));
  $('approvals-count').textContent = String(state.pending.length);
  $('approvals-toggle').classList.toggle('attention', state.pending.length > 0);
  $('approvals-empty').hidden = state.pending.length > 0;
  const ul = $('approvals-list');
  ul.replaceChildren();
  for (const p of state.pending) {
    const li = el('li');
    const inline = document.querySelector('.approval[data-request-id="' + CSS.escape(p.requestId) + '"]');
    li.append(approvalCard(p.requestId, p.toolName, p.input, inline ? inline.dataset.sourceWorkspaceId : undefined));
    if (p.timestamp) li.append(el('div', 'meta', new Date(p.timestamp).toLocaleString()));
    ul.append(li);
  }
  // An inline card whose request is no longer pending (decided in another
  // tab, timed out, or before a reload) must not offer buttons.
  document.querySelectorAll('#messages .approval').forEach(card => {
    const id = card.dataset.requestId;
    if (Number(card.dataset.created) > started) return; // newer than this answer
    if (card.classList.contains('answered')) return;
    // Decided in another tab or client, timed out, or its turn ended:
    // the card cannot tell which, so it says only that it is over.
    if (!ids.has(id) && !state.answered.has(id)) markAnswered(id, 'No longer pending', false);
  });
}
