"""What the tests share, and no test: helpers (``from tests.support.engine_helpers import
strict``), the result invariants, installed plugin sites, the plugins Ray workers import (by
module name: the workers get the checkout on ``PYTHONPATH``) and the test servers
(``_servers``)."""
