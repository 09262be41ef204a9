// What the page knows and what survives a reload: the shared state object
// and its localStorage (the user token in team mode, the running turn and
// its resume point, the open session).

export const store = {
  get(k) {
    try { return JSON.parse(localStorage.getItem('waggle.' + k)); } catch (_) { return null; }
  },
  set(k, v) { localStorage.setItem('waggle.' + k, JSON.stringify(v)); },
  del(k) { localStorage.removeItem('waggle.' + k); },
};

export const state = {
  mode: 'local',
  token: null,
  workspace: null,
  session: null,
  sessions: [],
  turn: null,
  sending: false,
  leaving: false,
  pending: [],
  // teams are the signed-in user's teams on a team server
  // (GET /api/teams: {id, name, role}); workspaces are created in one.
  teams: [],
  // answered maps requestId → the label of the decision taken here.
  answered: new Map(),
  // listed is the workspace's last full session listing (branchOf
  // included): what the branch switchers are computed from.
  listed: [],
  // editing is the user message being edited ({el}), or null.
  editing: null,
};
