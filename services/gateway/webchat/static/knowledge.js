// The memory panel's Knowledge section: the workspace's knowledge graph
// (GET /api/memory/graph) as a list of entities, each with its relations
// as "A — leads → B" lines, a page at a time, and Retire per entity.
// Names come from conversations and the extraction model: every one is
// text (el() sets textContent), never markup.

import { api, enc } from './api.js';
import { $, button, el, showError } from './dom.js';
import { state } from './state.js';

// pageSize is the entities a page asks for; the list's data-page-size
// overrides it (the browser test pages through a small graph with it).
function pageSize() {
  const n = Number($('knowledge-list').dataset.pageSize);
  return Number.isInteger(n) && n > 0 ? n : 50;
}

// graph is what the list shows: names by entity id (for relation lines
// whose other end came on another page), relations not yet drawn because
// an end is not loaded, the ids drawn, and the next page's offset.
let graph = fresh();
// generation drops the answer of a load that a newer one replaced (a
// search typed while the first page was on its way).
let generation = 0;

function fresh() {
  return { names: new Map(), pending: [], drawn: new Set(), next: 0, query: '' };
}

// loadKnowledge draws the first page of the workspace's graph; a search
// in the memory panel narrows it to the entities whose name contains it
// and their neighbours.
export async function loadKnowledge() {
  const ul = $('knowledge-list');
  const more = $('knowledge-more');
  more.hidden = true;
  generation++;
  graph = fresh();
  if (!state.workspace) {
    ul.replaceChildren();
    return;
  }
  graph.query = $('memory-search').value.trim();
  ul.replaceChildren();
  await loadPage(generation);
}

// moreKnowledge appends the next page (the server's nextOffset).
export async function moreKnowledge() {
  if (!graph.next) return;
  await loadPage(generation);
}

async function loadPage(gen) {
  const ul = $('knowledge-list');
  const more = $('knowledge-more');
  let path = '/api/memory/graph?workspace=' + enc(state.workspace) + '&limit=' + pageSize() + '&offset=' + graph.next;
  if (graph.query) path += '&q=' + enc(graph.query);
  more.disabled = true;
  let r;
  try {
    r = await api('GET', path);
  } catch (err) {
    if (gen === generation) showError(err);
    return;
  } finally {
    more.disabled = false;
  }
  if (gen !== generation) return;
  const entities = (r && Array.isArray(r.entities)) ? r.entities.filter(e => e && typeof e.id === 'string') : [];
  const relations = (r && Array.isArray(r.relations)) ? r.relations.filter(x => x && typeof x.id === 'string') : [];
  ul.querySelector('li.meta')?.remove();
  for (const e of entities) {
    if (graph.names.has(e.id)) continue; // a neighbour drawn on an earlier page
    graph.names.set(e.id, String(e.name ?? e.label ?? ''));
    ul.append(entityItem(e));
  }
  graph.pending.push(...relations);
  drawRelations();
  graph.next = Number.isInteger(r && r.nextOffset) && r.nextOffset > 0 ? r.nextOffset : 0;
  more.hidden = !graph.next;
  if (!ul.children.length) {
    ul.append(el('li', 'meta', graph.query ? 'No known entity matches.' : 'Nothing known yet: names and relations from your conversations and saved memories appear here.'));
  }
}

// drawRelations puts each relation under its source entity once both its
// ends are on the page; the rest wait for a later page.
function drawRelations() {
  const ul = $('knowledge-list');
  const waiting = [];
  for (const x of graph.pending) {
    if (graph.drawn.has(x.id)) continue;
    const from = x.source_id ?? x.source;
    const to = x.target_id ?? x.target;
    const li = [...ul.children].find(c => c.dataset.id === from);
    if (!li || !graph.names.has(to)) {
      waiting.push(x);
      continue;
    }
    graph.drawn.add(x.id);
    const type = String(x.relation_type ?? x.relationship ?? '').replace(/_/g, ' ');
    const line = el('div', 'relation', graph.names.get(from) + ' — ' + type + ' → ' + graph.names.get(to));
    line.dataset.id = x.id;
    line.dataset.target = to;
    li.querySelector('.relations').append(line);
  }
  graph.pending = waiting;
}

function entityItem(e) {
  const li = el('li', 'entity');
  li.dataset.id = e.id;
  const head = el('div', 'entity-head');
  head.append(el('span', 'entity-name', String(e.name ?? e.label ?? '')));
  const type = String(e.type ?? e.entity_type ?? '');
  if (type) head.append(el('span', 'entity-type', type));
  if (Number.isInteger(e.mentions) && e.mentions > 0) {
    head.append(el('span', 'entity-mentions', e.mentions === 1 ? '1 mention' : e.mentions + ' mentions'));
  }
  const retire = button('Retire', 'retire', () => retireEntity(e.id, String(e.name ?? ''), retire));
  retire.title = 'Mark this as no longer true (kept in history; the agent stops using it)';
  retire.setAttribute('aria-label', 'Retire ' + String(e.name ?? ''));
  head.append(retire);
  li.append(head, el('div', 'relations'));
  return li;
}

// retireEntity retires an entity with its relations (the server's
// correct_knowledge) and takes off the list what the server says it
// retired; in the entity's place an Undo restores it.
async function retireEntity(id, name, btn) {
  btn.disabled = true;
  let r;
  try {
    r = await api('POST', '/api/memory/graph/' + enc(id) + '/retire?workspace=' + enc(state.workspace),
      { reason: 'Retired in the web chat' });
  } catch (err) {
    btn.disabled = false;
    showError(err);
    return;
  }
  const gone = new Set([id]);
  for (const x of [...(r && Array.isArray(r.entities) ? r.entities : []), ...(r && Array.isArray(r.relations) ? r.relations : [])]) {
    if (x && typeof x.id === 'string') gone.add(x.id);
  }
  const ul = $('knowledge-list');
  const note = el('li', 'meta retired', 'Retired “' + name + '”. ');
  note.append(button('Undo', 'undo', () => restoreEntity(id, note)));
  ul.querySelector('li.entity[data-id="' + CSS.escape(id) + '"]')?.replaceWith(note);
  for (const node of ul.querySelectorAll('li.entity, .relation')) {
    if (gone.has(node.dataset.id) || gone.has(node.dataset.target)) node.remove();
  }
  for (const g of gone) graph.names.delete(g);
  graph.pending = graph.pending.filter(x => !gone.has(x.id) && !gone.has(x.source_id) && !gone.has(x.target_id));
}

// restoreEntity undoes a retirement (the entity and the relations retired
// with it) and draws the list again.
async function restoreEntity(id, note) {
  note.querySelector('button').disabled = true;
  try {
    await api('POST', '/api/memory/graph/' + enc(id) + '/restore?workspace=' + enc(state.workspace));
  } catch (err) {
    note.querySelector('button').disabled = false;
    showError(err);
    return;
  }
  await loadKnowledge();
}
