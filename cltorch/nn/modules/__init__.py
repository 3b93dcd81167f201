"""The layer classes of ``cltorch.nn`` (PyTorch's ``torch.nn.modules``)."""
from .module import Module, RemovableHandle, register_module_forward_hook, register_module_forward_pre_hook  # noqa
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict, Container  # noqa
from .linear import Identity, Linear, Bilinear  # noqa  (NonDynamicallyQuantizableLinear stays in .linear, as in torch)
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa
from .conv import Conv3d, ConvTranspose3d  # noqa
from .pooling import (MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool3d,  # noqa
                      MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, FractionalMaxPool2d, FractionalMaxPool3d)
from .sparse import EmbeddingBag  # noqa
from .loss import MultiMarginLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss, CTCLoss  # noqa
from .pooling import (MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,  # noqa
                      AdaptiveMaxPool2d)
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, GroupNorm, RMSNorm,  # noqa
                            InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm)
from .activation import (Threshold, ReLU, ReLU6, RReLU, Hardtanh, LeakyReLU, PReLU, ELU, CELU, SELU, GELU,  # noqa
                         SiLU, Mish, Tanh, Sigmoid, Hardsigmoid, Hardswish, Hardshrink, Softshrink, Tanhshrink,
                         Softsign, Softplus, LogSigmoid, GLU, Softmax, Softmin, LogSoftmax, Softmax2d,
                         MultiheadAttention)
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, AlphaDropout  # noqa
from .sparse import Embedding  # noqa
from .flatten import Flatten, Unflatten, PixelShuffle, PixelUnshuffle, ChannelShuffle, Unfold  # noqa
from .upsampling import (Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, ZeroPad1d, ZeroPad2d,  # noqa
                         ConstantPad1d, ConstantPad2d, ReflectionPad1d, ReflectionPad2d, ReplicationPad1d,
                         ReplicationPad2d, CircularPad1d, CircularPad2d, ConstantPad3d, ZeroPad3d,
                         ReflectionPad3d, ReplicationPad3d, CircularPad3d)
from .distance import PairwiseDistance, CosineSimilarity  # noqa
from .transformer import (TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,  # noqa
                          TransformerDecoder, Transformer)
from .loss import (L1Loss, MSELoss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss,  # noqa
                   SmoothL1Loss, HuberLoss, PoissonNLLLoss, GaussianNLLLoss, MarginRankingLoss, HingeEmbeddingLoss,
                   SoftMarginLoss, CosineEmbeddingLoss, TripletMarginLoss, MultiLabelSoftMarginLoss)
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell  # noqa
from .lazy import (LazyLinear, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,  # noqa
                   LazyConvTranspose2d, LazyConvTranspose3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d,
                   LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d)
from .sync_batchnorm import SyncBatchNorm  # noqa
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa
from .more_layers import Fold, LPPool1d, LPPool2d, LPPool3d, FeatureAlphaDropout, CrossMapLRN2d, NLLLoss2d  # noqa
from .linear_cross_entropy import LinearCrossEntropyLoss, LinearCrossEntropyOptions  # noqa
