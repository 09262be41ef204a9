// Branches: editing an earlier user message makes a new session from the
// messages before it (POST …/sessions/:id/branch, docs/sessions.md), and
// the ‹ n / N › switcher goes between a message's versions.

import { APIError, api, enc } from './api.js';
import { $, button, el, hideError, showError } from './dom.js';
import { openSession } from './messages.js';
import { state } from './state.js';
import { sendText } from './turn.js';

// ---- branches --------------------------------------------------------
// A branch is a session made by POST …/sessions/:id/branch {at}: copies
// of the first `at` messages of the session it came from, recorded in
// its listing entry as branchOf {session, at}. Message i of a session
// has as alternatives the sessions that differ from it first at i.

function listedSession(id) { return state.listed.find(s => s.id === id); }

// branchesAt lists the sessions branched from session id at message i,
// oldest first.
function branchesAt(id, i) {
  return state.listed
    .filter(s => s.branchOf && s.branchOf.session === id && s.branchOf.at === i)
    .sort((a, b) => String(a.created).localeCompare(String(b.created)) || a.id.localeCompare(b.id));
}

// alternatives are the sessions to switch between at message i of
// session id, in order, id among them. Messages before a branch point
// are copies of the source's, so their alternatives are the source's
// (with this session standing in for the source).
function alternatives(id, i, depth = 0) {
  const b = (listedSession(id) || {}).branchOf;
  if (b && i <= b.at && depth < 32 && listedSession(b.session)) {
    const list = alternatives(b.session, i, depth + 1);
    return i < b.at ? list.map(x => (x === b.session ? id : x)) : list;
  }
  return [id, ...branchesAt(id, i).map(s => s.id)];
}

// showBranches puts a ‹ n / N › switcher on each user message that has
// alternatives (from a fresh listing of the workspace's sessions).
export async function showBranches() {
  const id = state.session;
  if (!id) return;
  try {
    const r = await api('GET', '/api/workspaces/' + enc(state.workspace) + '/sessions');
    state.listed = Array.isArray(r) ? r : [];
  } catch (_) {
    return; // the history is shown; only the switchers are missing
  }
  if (state.session !== id) return;
  document.querySelectorAll('#messages .msg.user:not(.failed)').forEach(m => {
    const old = m.querySelector(':scope > .branches');
    if (old) old.remove();
    if (m.dataset.index === undefined) return;
    const alts = alternatives(id, Number(m.dataset.index));
    if (alts.length < 2) return;
    const k = alts.indexOf(id);
    const nav = el('div', 'branches');
    nav.setAttribute('role', 'group');
    nav.setAttribute('aria-label', 'Versions of this message');
    const go = j => () => { if (!state.turn && !state.sending) openSession(alts[j]); };
    const prev = button('‹', 'branch-prev', go(k - 1));
    prev.setAttribute('aria-label', 'Previous version');
    prev.disabled = k <= 0;
    const next = button('›', 'branch-next', go(k + 1));
    next.setAttribute('aria-label', 'Next version');
    next.disabled = k >= alts.length - 1;
    nav.append(prev, el('span', 'branch-pos', (k + 1) + ' / ' + alts.length), next);
    m.insertBefore(nav, m.querySelector(':scope > .msg-actions'));
  });
}

// sendEdit branches the open session at the message being edited and
// sends text there. The message's index is the server's: the k-th user
// message on screen is the k-th in the stored history (a refused send
// is marked failed and was never stored).
export async function sendEdit(text) {
  const ed = state.editing;
  if (!text.trim() || state.turn || state.sending || !state.session) return;
  const users = [...document.querySelectorAll('#messages .msg.user:not(.failed)')];
  const k = users.indexOf(ed.el);
  hideError();
  state.sending = true;
  let branch;
  try {
    const h = await api('GET', '/api/history?workspace=' + enc(state.workspace) + '&session=' + enc(state.session));
    const at = (h.messages || []).map((m, i) => (m.role === 'user' ? i : -1)).filter(i => i >= 0)[k];
    if (k < 0 || at === undefined) throw new APIError(0, 'That message is not in the stored history; it cannot be edited.');
    branch = await api('POST', '/api/workspaces/' + enc(state.workspace) + '/sessions/' + enc(state.session) + '/branch', { at });
  } catch (err) {
    showError(err);
    return;
  } finally {
    state.sending = false;
  }
  await openSession(branch.id);
  $('input').value = text;
  await sendText(text, true);
}
