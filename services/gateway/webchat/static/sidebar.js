// Workspaces and sessions: the sidebar's lists, forms, rename, delete and
// search, and starting a new chat.

import { APIError, api, enc } from './api.js';
import { $, button, cleanTitle, el, showError } from './dom.js';
import { filesState, probeFiles } from './files.js';
import { loadMemory } from './memory.js';
import { cancelEdit, openSession } from './messages.js';
import { state, store } from './state.js';

// ---- workspaces and sessions ---------------------------------------

// writableTeams are the teams the user may create workspaces in.
function writableTeams() { return state.teams.filter(t => t.role !== 'viewer'); }

export async function loadTeams() {
  try {
    const r = await api('GET', '/api/teams');
    state.teams = Array.isArray(r.teams) ? r.teams.filter(t => t && typeof t.id === 'string') : [];
  } catch (err) {
    showError(err);
    state.teams = [];
  }
}

export async function loadWorkspaces() {
  let list = [];
  try {
    list = await api('GET', '/api/workspaces');
  } catch (err) {
    showError(err);
  }
  if (!Array.isArray(list)) list = list.workspaces || [];
  // A team server has no workspace everyone shares: a user without one
  // yet is offered to create one (in one of their teams), not sent to a
  // "default" workspace that is not theirs.
  if (state.mode === 'team' && !list.length) {
    state.workspace = null;
    $('workspace').replaceChildren();
    offerWorkspace();
    return;
  }
  const sel = $('workspace');
  sel.replaceChildren();
  // A user in several teams sees the workspaces grouped by team.
  const grouped = state.mode === 'team' && state.teams.length > 1;
  const groups = new Map();
  for (const w of list) {
    const o = el('option', '', w.name || w.id);
    o.value = w.id;
    if (!grouped) {
      sel.append(o);
      continue;
    }
    const team = w.teamId || '';
    if (!groups.has(team)) {
      const t = state.teams.find(x => x.id === team);
      const g = el('optgroup');
      g.label = t ? (t.name || t.id) : (team || 'No team');
      groups.set(team, g);
      sel.append(g);
    }
    groups.get(team).append(o);
  }
  const want = store.get('workspace');
  const pick = list.find(w => w.id === want) || list.find(w => w.id === 'default') || list[0];
  state.workspace = pick ? pick.id : 'default';
  if (!pick) {
    const o = el('option', '', 'default');
    o.value = 'default';
    sel.append(o);
  }
  sel.value = state.workspace;
}

export async function selectWorkspace(id) {
  state.workspace = id;
  store.set('workspace', id);
  $('workspace').value = id;
  $('search').value = '';
  if (!$('memory').hidden) loadMemory();
  filesState.dir = '/';
  await probeFiles();
  await loadSessions();
}

// The workspace form creates a workspace or renames the current one.
let workspaceFormMode = 'create';

// offerWorkspace opens the create form for a user with no workspace.
export function offerWorkspace() {
  const teams = writableTeams();
  $('workspace-hint').textContent = teams.length
    ? 'You have no workspace yet. Name one to start chatting.'
    : 'You have no workspace yet, and no team you can create one in. Ask a team admin to add you as a member.';
  $('workspace-hint').hidden = false;
  workspaceFormMode = '';
  showWorkspaceForm('create');
}

export function showWorkspaceForm(mode) {
  const form = $('workspace-form');
  if (!form.hidden && workspaceFormMode === mode) {
    form.hidden = true;
    return;
  }
  if (state.workspace) $('workspace-hint').hidden = true;
  workspaceFormMode = mode;
  // On a team server a new workspace belongs to one of the user's
  // teams: a choice when there are several.
  const teams = mode === 'create' && state.mode === 'team' ? writableTeams() : [];
  const teamSel = $('workspace-team');
  teamSel.replaceChildren();
  for (const t of teams) {
    const o = el('option', '', t.name || t.id);
    o.value = t.id;
    teamSel.append(o);
  }
  teamSel.hidden = teams.length < 2;
  const sel = $('workspace');
  $('workspace-name').value = mode === 'rename' && sel.selectedOptions[0] ? sel.selectedOptions[0].textContent : '';
  $('workspace-submit').textContent = mode === 'rename' ? 'Save' : 'Create';
  form.hidden = false;
  $('workspace-name').focus();
}

export async function submitWorkspace(e) {
  e.preventDefault();
  const name = $('workspace-name').value.trim();
  if (!name) return;
  try {
    let id = state.workspace;
    if (workspaceFormMode === 'rename') {
      await api('PATCH', '/api/workspaces/' + enc(id), { name });
    } else {
      const body = { name };
      if (state.mode === 'team') {
        const teamId = $('workspace-team').value || (writableTeams()[0] || {}).id;
        if (!teamId) throw new APIError(0, 'You are in no team you can create a workspace in. Ask a team admin to add you.');
        body.teamId = teamId;
      }
      id = (await api('POST', '/api/workspaces', body)).id;
    }
    $('workspace-name').value = '';
    $('workspace-form').hidden = true;
    $('workspace-hint').hidden = true;
    store.set('workspace', id);
    await loadWorkspaces();
    if (workspaceFormMode !== 'rename') {
      await selectWorkspace(id);
      newChat();
    }
  } catch (err) {
    showError(err);
  }
}

// deleteWorkspace deletes the current workspace (its sessions and
// memories too) on the second click.
export async function deleteWorkspace() {
  const btn = $('delete-workspace');
  if (state.turn) return;
  if (!btn.classList.contains('confirm')) {
    btn.classList.add('confirm');
    btn.textContent = 'Delete it and all its sessions?';
    return;
  }
  btn.classList.remove('confirm');
  btn.textContent = 'Delete';
  try {
    await api('DELETE', '/api/workspaces/' + enc(state.workspace));
  } catch (err) {
    showError(err);
    return;
  }
  store.del('workspace');
  await loadWorkspaces();
  await selectWorkspace(state.workspace);
  newChat();
}

export async function loadSessions() {
  if (!state.workspace) { // a team-server user without a workspace yet
    state.sessions = [];
    renderSessions();
    return;
  }
  const q = $('search').value.trim();
  const ws = enc(state.workspace);
  try {
    if (q.length >= 2) {
      const r = await api('GET', '/api/workspaces/' + ws + '/sessions/search?q=' + enc(q) + '&limit=50');
      const results = Array.isArray(r) ? r : (r.results || []);
      state.sessions = results.map(s => ({
        id: s.sessionId,
        title: typeof s.title === 'string' ? s.title : s.sessionId,
        snippet: s.snippets && s.snippets[0] ? (s.snippets[0].text || s.snippets[0].content || '') : '',
      }));
    } else {
      const r = await api('GET', '/api/workspaces/' + ws + '/sessions');
      state.sessions = Array.isArray(r) ? r : [];
      state.listed = state.sessions;
    }
  } catch (err) {
    if (!(err.status === 400 && q)) showError(err);
    state.sessions = [];
  }
  renderSessions();
}

export function renderSessions() {
  const ul = $('sessions');
  ul.replaceChildren();
  for (const s of state.sessions) {
    const li = el('li', s.id === state.session ? 'session current' : 'session');
    li.dataset.id = s.id;
    const open = button(cleanTitle(s.title || s.id), 'open', () => openSession(s.id));
    open.title = cleanTitle(s.title || s.id);
    li.append(open);
    if (s.branchOf) li.append(el('span', 'branch-mark', '↳ branch'));
    if (s.snippet) li.append(el('div', 'snippet', s.snippet));
    li.append(button('Rename', 'rename', () => startRename(li, s)));
    li.append(button('Delete', 'delete', ev => deleteSession(ev.currentTarget, s)));
    ul.append(li);
  }
  if (!state.sessions.length) ul.append(el('li', 'empty', $('search').value.trim() ? 'No matching sessions' : 'No sessions yet'));
  const cur = state.sessions.find(s => s.id === state.session);
  if (cur) $('title').textContent = cleanTitle(cur.title || cur.id);
}

function startRename(li, s) {
  const input = el('input', 'rename-input');
  input.value = s.title || '';
  input.setAttribute('aria-label', 'New title');
  li.replaceChildren(input);
  input.focus();
  input.select();
  let done = false;
  const finish = async save => {
    if (done) return;
    done = true;
    const title = input.value.trim();
    if (save && title && title !== s.title) {
      try {
        await api('PATCH', '/api/sessions/' + enc(s.id) + '?workspace=' + enc(state.workspace), { title });
      } catch (err) {
        showError(err);
      }
    }
    await loadSessions();
  };
  input.addEventListener('keydown', e => {
    if (e.key === 'Enter') { e.preventDefault(); finish(true); }
    if (e.key === 'Escape') finish(false);
  });
  input.addEventListener('blur', () => finish(true));
}

// deleteSession asks once (the button turns into "Confirm") and deletes
// on the second click.
async function deleteSession(btn, s) {
  if (!btn.classList.contains('confirm')) {
    btn.classList.add('confirm');
    btn.textContent = 'Confirm delete';
    return;
  }
  try {
    await api('DELETE', '/api/sessions/' + enc(s.id) + '?workspace=' + enc(state.workspace));
    if (state.session === s.id) newChat();
  } catch (err) {
    showError(err);
  }
  await loadSessions();
}

export function newChat() {
  if (state.turn || state.sending) return;
  state.session = null;
  store.del('session');
  $('messages').replaceChildren();
  $('title').textContent = 'New chat';
  $('jump').hidden = true;
  cancelEdit();
  renderSessions();
  closeMenu();
  $('input').focus();
}

// ---- layout --------------------------------------------------------

// The phone-width drawer: ☰ opens it; its × button, a tap on the scrim
// beside it and Escape close it (focus goes back to ☰).
export function openMenu() {
  document.body.classList.add('menu-open');
  $('menu-close').focus();
}

export function closeMenu() {
  if (!document.body.classList.contains('menu-open')) return;
  document.body.classList.remove('menu-open');
  if ($('sidebar').contains(document.activeElement)) $('menu').focus();
}
