// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * *Share with Agent…* and *Stop Sharing with Agent…* on a tool terminal:
 * let one of the user's agents read that terminal's screen ("why did my
 * build fail?"), never type into it, and stop it again.
 */

import {
  InputDialog,
  Notification,
  showErrorMessage
} from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';

import type { IAgentModel } from './api';
import { shareWithAgent, stopSharingWithAgent } from './api';
import type { AgentsModel } from './model';
import { listedNow } from './widgets';

/**
 * Pick one of the user's agents and let it read a session's screen.
 *
 * @param session - The session id of the tool terminal.
 * @param model - The agents model.
 * @param trans - The translation bundle.
 * @returns The agent it was shared with, or `null` (cancelled, none, or
 *   refused: the user was told why).
 */
export function shareSession(
  session: string,
  model: AgentsModel,
  trans: TranslationBundle
): Promise<IAgentModel | null> {
  return pickAndSend(session, model, trans, {
    candidates: agents => agents.filter(a => !a.shared.includes(session)),
    none: agents =>
      agents.length === 0
        ? trans.__('You have no agent: use Connect an Agent… first.')
        : trans.__('This terminal is already shared with all your agents.'),
    title: trans.__('Share with Agent'),
    send: agent => shareWithAgent(agent.id, session, model.serverSettings),
    failure: agent =>
      trans.__('Could not share the terminal with %1', agent.name),
    success: agent =>
      trans.__(
        'Agent "%1" can now read this terminal (it cannot type).',
        agent.name
      )
  });
}

/**
 * Pick one of the agents a session is shared with and stop sharing it.
 *
 * @param session - The session id of the tool terminal.
 * @param model - The agents model.
 * @param trans - The translation bundle.
 * @returns The agent it is no longer shared with, or `null`.
 */
export function unshareSession(
  session: string,
  model: AgentsModel,
  trans: TranslationBundle
): Promise<IAgentModel | null> {
  return pickAndSend(session, model, trans, {
    candidates: agents => agents.filter(a => a.shared.includes(session)),
    none: () => trans.__('This terminal is not shared with any agent.'),
    title: trans.__('Stop Sharing with Agent'),
    send: agent =>
      stopSharingWithAgent(agent.id, session, model.serverSettings),
    failure: agent =>
      trans.__('Could not stop sharing the terminal with %1', agent.name),
    success: agent =>
      trans.__('Agent "%1" can no longer read this terminal.', agent.name)
  });
}

/**
 * What {@link pickAndSend} offers, sends and says.
 */
interface ISharingStep {
  /**
   * The agents to pick from, among the user's.
   */
  candidates: (agents: ReadonlyArray<IAgentModel>) => IAgentModel[];
  /**
   * What to say when there is none to pick.
   */
  none: (agents: ReadonlyArray<IAgentModel>) => string;
  /**
   * The picker's title.
   */
  title: string;
  /**
   * The server call for the agent picked.
   */
  send: (agent: IAgentModel) => Promise<void>;
  /**
   * What could not be done, for the error dialog.
   */
  failure: (agent: IAgentModel) => string;
  /**
   * What was done, for the notification.
   */
  success: (agent: IAgentModel) => string;
}

/**
 * List the agents, pick one of the candidates, send, say what came of it.
 */
async function pickAndSend(
  session: string,
  model: AgentsModel,
  trans: TranslationBundle,
  step: ISharingStep
): Promise<IAgentModel | null> {
  const agents = await listedNow(model, trans);
  if (agents === null) {
    return null;
  }
  const candidates = step.candidates(agents);
  if (candidates.length === 0) {
    Notification.info(step.none(agents));
    return null;
  }
  const agent = await pickAgent(candidates, step.title, trans);
  if (agent === null) {
    return null;
  }
  try {
    await step.send(agent);
  } catch (error) {
    await showErrorMessage(step.failure(agent), error as Error);
    return null;
  }
  void model.refresh().catch(() => undefined);
  Notification.success(step.success(agent));
  return agent;
}

/**
 * The labels of agents in a list: their names, with the start of their
 * ids where two share a name.
 *
 * @param agents - The agents.
 */
export function agentLabels(agents: ReadonlyArray<IAgentModel>): string[] {
  const counts = new Map<string, number>();
  for (const agent of agents) {
    counts.set(agent.name, (counts.get(agent.name) ?? 0) + 1);
  }
  return agents.map(agent =>
    (counts.get(agent.name) ?? 0) > 1
      ? `${agent.name} (${agent.id.slice(0, 8)})`
      : agent.name
  );
}

/**
 * Ask which agent; `null` when cancelled.
 */
async function pickAgent(
  agents: IAgentModel[],
  title: string,
  trans: TranslationBundle
): Promise<IAgentModel | null> {
  const labels = agentLabels(agents);
  const choice = await InputDialog.getItem({
    title,
    label: trans.__('Agent'),
    items: labels
  });
  const index = choice.value === null ? -1 : labels.indexOf(choice.value);
  return choice.button.accept && index >= 0 ? agents[index] : null;
}
