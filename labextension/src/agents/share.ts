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

/**
 * Pick one of the user's agents and let it read a session's screen.
 *
 * @param session - The session id of the tool terminal.
 * @param model - The agents model.
 * @param trans - The translation bundle.
 * @returns The agent it was shared with, or `null` (cancelled, none, or
 *   refused: the user was told why).
 */
export async function shareSession(
  session: string,
  model: AgentsModel,
  trans: TranslationBundle
): Promise<IAgentModel | null> {
  const agents = await listed(model, trans);
  if (agents === null) {
    return null;
  }
  const candidates = agents.filter(agent => !agent.shared.includes(session));
  if (candidates.length === 0) {
    Notification.info(
      agents.length === 0
        ? trans.__('You have no agent: use Connect an Agent… first.')
        : trans.__('This terminal is already shared with all your agents.')
    );
    return null;
  }
  const agent = await pickAgent(
    candidates,
    trans.__('Share with Agent'),
    trans
  );
  if (agent === null) {
    return null;
  }
  try {
    await shareWithAgent(agent.id, session, model.serverSettings);
  } catch (error) {
    await showErrorMessage(
      trans.__('Could not share the terminal with %1', agent.name),
      error as Error
    );
    return null;
  }
  void model.refresh().catch(() => undefined);
  Notification.success(
    trans.__(
      'Agent "%1" can now read this terminal (it cannot type).',
      agent.name
    )
  );
  return agent;
}

/**
 * Pick one of the agents a session is shared with and stop sharing it.
 *
 * @param session - The session id of the tool terminal.
 * @param model - The agents model.
 * @param trans - The translation bundle.
 * @returns The agent it is no longer shared with, or `null`.
 */
export async function unshareSession(
  session: string,
  model: AgentsModel,
  trans: TranslationBundle
): Promise<IAgentModel | null> {
  const agents = await listed(model, trans);
  if (agents === null) {
    return null;
  }
  const sharing = agents.filter(agent => agent.shared.includes(session));
  if (sharing.length === 0) {
    Notification.info(trans.__('This terminal is not shared with any agent.'));
    return null;
  }
  const agent = await pickAgent(
    sharing,
    trans.__('Stop Sharing with Agent'),
    trans
  );
  if (agent === null) {
    return null;
  }
  try {
    await stopSharingWithAgent(agent.id, session, model.serverSettings);
  } catch (error) {
    await showErrorMessage(
      trans.__('Could not stop sharing the terminal with %1', agent.name),
      error as Error
    );
    return null;
  }
  void model.refresh().catch(() => undefined);
  Notification.success(
    trans.__('Agent "%1" can no longer read this terminal.', agent.name)
  );
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
 * The agents as the server lists them now, or `null` when it cannot (the
 * user was told why).
 */
async function listed(
  model: AgentsModel,
  trans: TranslationBundle
): Promise<ReadonlyArray<IAgentModel> | null> {
  try {
    await model.refresh();
  } catch (error) {
    await showErrorMessage(
      trans.__('Could not list the agents'),
      error as Error
    );
    return null;
  }
  return model.agents;
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
